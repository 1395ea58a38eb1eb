"""The HTTP host: one ASGI app for every surface, the process model, Host/Origin checks, body limits and bearer
authentication.

It knows surfaces only through `core.seam.surfaces`; MCP, REST, GraphQL and llms.txt are served side by side on it.
A surface uses nothing of the host's modules: HTTP's vocabulary (problem codes, problem+json, conditional GETs) is
`core.web`, below both, and the caller's principal is `core.seam.surfaces.principal_of_scope`
(tests/test_architecture.py).
"""
