"""The HTTP host: one ASGI app for every surface, the process model, Host/Origin checks, body limits and bearer
authentication.

It knows surfaces only through `core.surfaces`; MCP, REST, GraphQL and llms.txt are served side by side on it.
"""
