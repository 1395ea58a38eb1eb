"""Documentation keeps up with the product: every command, tool, resource and error code a user meets is in the docs."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from core.app.cli import _parser
from core.dispatch.guides import guides
from core.dispatch.registry import build_registry
from core.lang.model import Model
from core.values.errors import CanonError

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"


def _commands() -> list[str]:
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


@pytest.mark.parametrize("command", _commands())
def test_every_cli_command_is_in_the_cli_reference(command: str) -> None:
    assert f"`canon {command}" in (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")


def test_every_tool_and_resource_is_in_the_mcp_guide(model: Model) -> None:
    guide = (DOCS / "surfaces" / "mcp.md").read_text(encoding="utf-8")
    registry = build_registry(model)
    missing = [t.name for t in registry.tools if f"`{t.name}`" not in guide]
    missing += [r.uri or "" for r in registry.resources if r.uri and not r.uri.startswith("canon://types/")
                and f"`{r.uri}`" not in guide]  # fmt: skip
    missing += [t.uri_template or "" for t in registry.templates if f"`{t.uri_template}`" not in guide]
    assert not missing


def test_every_error_code_is_in_the_error_reference() -> None:
    reference = (DOCS / "reference" / "errors.md").read_text(encoding="utf-8")
    codes = {cls.code for cls in _subclasses(CanonError)} | {CanonError.code}
    assert len(codes) >= 10
    assert sorted(code for code in codes if f"| `{code}` |" not in reference) == []


def test_every_decision_record_is_listed_in_the_index() -> None:
    index = (DOCS / "decisions" / "README.md").read_text(encoding="utf-8")
    records = sorted(p.name for p in (DOCS / "decisions").glob("[0-9][0-9][0-9][0-9]-*.md"))
    assert records
    assert all(f"({name})" in index for name in records)


def test_every_relative_link_in_the_docs_points_at_a_file() -> None:
    broken: list[str] = []
    for page in [REPO / "README.md", *DOCS.rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert not broken


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    return found | {s for c in found for s in _subclasses(c)}


def test_every_tool_s_rest_route_and_graphql_field_is_in_the_surface_guides(model: Model) -> None:
    rest = (DOCS / "surfaces" / "rest.md").read_text(encoding="utf-8")
    graphql = (DOCS / "surfaces" / "graphql.md").read_text(encoding="utf-8")
    registry = build_registry(model)
    missing = []
    for tool in registry.tools:
        hint = tool.surface["rest"]
        if not re.search(rf"`{hint['method']} /api{re.escape(hint['path'])}[`?]", rest):
            missing.append(f"rest.md: {hint['method']} /api{hint['path']} ({tool.name})")
        if f"`{tool.name}`" not in graphql:
            missing.append(f"graphql.md: {tool.name}")
    assert not missing


def test_the_surface_guides_tool_tables_are_what_canon_generate_writes(model: Model) -> None:
    folder = DOCS / "surfaces"
    current = {name: (folder / name).read_text(encoding="utf-8") for name in ("mcp.md", "rest.md", "graphql.md")}

    assert guides(build_registry(model), folder) == current  # else: run `canon generate`


def test_the_example_systemd_unit_leaves_every_setting_to_canon_toml() -> None:
    unit = (DOCS / "operations" / "examples" / "canon.service").read_text(encoding="utf-8")
    (command,) = [line.removeprefix("ExecStart=") for line in unit.splitlines() if line.startswith("ExecStart=")]
    program, *arguments = command.split()

    args = _parser().parse_args(arguments)

    assert program.endswith("/bin/canon")
    assert args.handler.__name__ == "_serve"
    overriding = {"config": args.config, "store": args.store, "model": args.model, "host": args.host,
                  "port": args.port}  # fmt: skip
    assert {name: value for name, value in overriding.items() if value is not None} == {}, (
        "an option here would silently win over canon.toml in the working directory"
    )
