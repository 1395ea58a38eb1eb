"""The MCP wire suite with canon's fast path switched off: the plain SDK path it falls back to must pass it too.

The tests chosen are those that serve `/mcp` over HTTP (in-process, under uvicorn or as `canon serve`); the
in-memory tests (the fast path is not on their way), the stdio tests (stdio with the switch off has its own, in
tests/mcp/test_stdio.py), the `--workers` process-model tests, half of the access matrix's principals (`LEFT_OUT`)
and the fast path's own byte-for-byte tests (which need it on) are left out. It runs in a child `pytest`, because the
switch is read once, as canon reads it: `CANON_MCP_FASTPATH=0`.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.mcp.conftest import FASTPATH_VAR

HTTP_SUITE = [  # whole files that serve /mcp over HTTP, and the HTTP tests of files that are mostly in-memory
    "mcp/test_access_wire.py",
    "http/test_auth.py",
    "http/test_app.py",
    "http/test_serve.py",
    "mcp/test_http_app.py",
    "mcp/test_http_process.py",
    "mcp/test_resumption.py",
    "mcp/test_revision_gate.py",
    "mcp/test_subscriptions.py",
    "mcp/test_mcp_tools.py::test_mcp_param_headers_are_checked_for_a_tool_that_declares_them_and_only_for_it",
    "mcp/test_client_log.py::test_modern_discover_does_not_advertise_logging_and_set_level_is_not_served",
    "mcp/test_mcp_options.py::test_prefix_refuses_the_unprefixed_name_over_http_too",
]
# Left out by name: `--workers` tests the process model, whatever serves /mcp in each worker; stdio has its own
# run with the switch off (tests/mcp/test_stdio.py); and of the access matrix (the dispatcher's rule, the same on
# either path), three of its six principals are enough to carry each answer over the plain path: anonymous, a
# reader seeing through a group, and the admin.
LEFT_OUT = "not worker and not stdio and not (test_access_wire and (writer or reader-by-name or reader-20))"


@pytest.mark.slow
def test_the_http_mcp_suite_passes_with_the_fast_path_switched_off() -> None:
    env = {**os.environ, FASTPATH_VAR: "0"}
    files = [str(REPO / "tests" / name) for name in HTTP_SUITE]
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k", LEFT_OUT, *files]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1_800, check=False)

    assert done.returncode == 0, done.stdout[-4_000:] + done.stderr[-2_000:]
