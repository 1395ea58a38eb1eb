"""The fast path's own tests compare canon's answers with the SDK's, so they need canon's path on: switched off
(`CANON_MCP_FASTPATH=0`) they are skipped; on an SDK the fast path does not expect they fail, rather than compare
the SDK with itself."""

from __future__ import annotations

import pytest

from core.mcp.fastpath import sdk_compat
from tests.mcp.conftest import FASTPATH


@pytest.fixture(autouse=True)
def fast_path_on() -> None:
    if not FASTPATH:
        pytest.skip("the MCP fast path is switched off (CANON_MCP_FASTPATH)")
    assert sdk_compat.check().ok, sdk_compat.check().differences
