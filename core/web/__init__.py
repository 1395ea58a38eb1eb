"""HTTP's vocabulary, below the host and every surface: the one table of problem codes and their HTTP statuses,
the RFC 9457 problem+json writer every route answers errors with, and the `If-None-Match` test of conditional GETs.

A surface uses these names (`__all__`), never a module of the host (tests/test_architecture.py).
"""

from core.web.conditional import none_match
from core.web.problems import PAGE_ANSWER, PROBLEM_MEDIA, STATUS, code_of_status, problem_body, send_problem

__all__ = ["PAGE_ANSWER", "PROBLEM_MEDIA", "STATUS", "code_of_status", "none_match", "problem_body", "send_problem"]
