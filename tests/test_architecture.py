"""The dependency rules of the layout: frameworks stay at the edges, generators depend on core, never back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FRAMEWORKS = {"mcp", "mcp_types", "fastapi", "starlette", "strawberry", "uvicorn", "httpx", "httpx2"}
# The only core modules allowed to import a web or MCP framework: the HTTP host and the MCP surface.
SEAMS = {str(p.relative_to(REPO)) for package in ("http", "mcp") for p in (REPO / "core" / package).rglob("*.py")}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _modules(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


DOMAIN = [p for p in _modules("core") if str(p.relative_to(REPO)) not in SEAMS]


@pytest.mark.parametrize("path", DOMAIN, ids=lambda p: str(p.relative_to(REPO)))
def test_core_domain_modules_import_no_framework(path: Path) -> None:
    relative = str(path.relative_to(REPO))
    assert not (_imports(path) & FRAMEWORKS), f"{relative} imports a framework; only {sorted(SEAMS)} may"


@pytest.mark.parametrize("path", _modules("core"), ids=lambda p: str(p.relative_to(REPO)))
def test_core_never_imports_generators(path: Path) -> None:
    assert "generators" not in _imports(path)


def test_only_the_wire_imports_the_mcp_sdk() -> None:
    importers = {str(p.relative_to(REPO)) for p in _modules("core") if {"mcp", "mcp_types"} & _imports(p)}
    assert importers, "the MCP surface should import the SDK somewhere"
    assert importers <= SEAMS


def test_the_walker_sees_imports() -> None:
    """Guard against a walker that finds nothing and so lets everything pass."""
    assert {"json", "sqlite3", "core"} <= _imports(REPO / "core" / "store" / "sqlite.py")
