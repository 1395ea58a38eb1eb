"""The HTTP host: one ASGI app for every surface, the process model, Host/Origin checks, body limits and bearer
authentication.

It knows surfaces only through `core.seam.surfaces`; MCP, REST, GraphQL and llms.txt are served side by side on it.

What a surface may use of the host is what this package exports (`__all__`), never one of its modules: the one
table of problem codes and their HTTP statuses, the problem+json writer every route answers errors with, and the
`If-None-Match` test of conditional GETs. Everything else here is the host's own (tests/test_architecture.py).
"""

from core.web.conditional import none_match
from core.web.problems import PROBLEM_MEDIA, STATUS, code_of_status, problem_body, send_problem

__all__ = ["PROBLEM_MEDIA", "STATUS", "code_of_status", "none_match", "problem_body", "send_problem"]
