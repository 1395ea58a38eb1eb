"""The surface seam: discovery, path claims, one app per current registry, bad tokens, artifacts (the change feed
surfaces watch: tests/core/test_changes.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from core.app.artifacts import MANIFEST, check, generate, write
from core.dispatch.registry import Registry, build_registry
from core.seam.instance import Instance
from core.seam.surfaces import (
    ENTRY_POINT_GROUP,
    RESERVED,
    Lifespan,
    Surface,
    SurfaceHost,
    _check_paths,
    claims,
    discover,
    surface_named,
)
from core.values.audit import AuditQuery
from tests.conftest import run_canon
from tests.generators.conftest import asgi, open_copy, token


@dataclass
class Echo:
    """A test surface: answers with the path it saw and the caller, and counts how often it was built."""

    name: str = "echo"
    paths: tuple[str, ...] = ("/echo/", "/echo.txt")
    built: list[Registry] = field(default_factory=list[Registry])
    files: Mapping[str, str] = field(default_factory=lambda: {"echo.txt": "echo\n"})

    def app(self, host: SurfaceHost, registry: Registry) -> Any:
        self.built.append(registry)

        async def serve(scope: Any, receive: Any, send: Any) -> None:
            principal = host.principal_of(_Request(scope))
            body = json.dumps({"path": scope["path"], "principal": principal.name,
                               "tools": len(registry.tools)}).encode()  # fmt: skip
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})  # fmt: skip
            await send({"type": "http.response.body", "body": body})

        return serve

    def artifacts(self, host: SurfaceHost) -> Mapping[str, str]:
        return self.files


@dataclass
class _Request:
    scope: Any


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def instance(seed_template: Path, tmp_path: Path) -> Any:
    opened = open_copy(seed_template, tmp_path)
    yield opened
    opened.close()


def test_a_test_surface_satisfies_the_protocol_and_installed_surfaces_load_mcp_first_then_by_name() -> None:
    assert isinstance(Echo(), Surface)
    surfaces = discover()
    assert [s.name for s in surfaces] == ["mcp", *sorted(s.name for s in surfaces if s.name != "mcp")]
    assert all(isinstance(s, Surface) for s in surfaces)
    assert ENTRY_POINT_GROUP == "canon.surfaces"


@pytest.mark.parametrize(
    ("prefix", "path", "served"),
    [("/api/", "/api", True), ("/api/", "/api/nodes/x", True), ("/api/", "/apix", False),
     ("/llms.txt", "/llms.txt", True), ("/llms.txt", "/llms.txt/x", False)],
)  # fmt: skip
def test_a_prefix_claims_itself_and_what_is_under_it_an_exact_path_only_itself(
    prefix: str, path: str, served: bool
) -> None:
    assert claims(prefix, path) is served


@pytest.mark.parametrize("paths", [("/mcp",), ("/healthz",), ("/metrics",), ("/ui-assets/x",), ("/",), ("relative",)])
def test_a_surface_may_not_claim_the_hosts_or_the_built_in_surfaces_paths_or_a_bad_path(
    paths: tuple[str, ...],
) -> None:
    with pytest.raises(ValueError, match="echo"):
        _check_paths([*discover(), Echo(paths=paths)])


def test_mcp_is_a_built_in_surface_found_like_any_other_and_only_the_host_paths_are_reserved() -> None:
    mcp = surface_named("mcp", discover())
    assert isinstance(mcp, Lifespan)
    assert mcp.paths == ("/mcp",)
    assert RESERVED == ("/healthz", "/metrics", "/ui-assets/", "/signin/", "/signout")


def test_discovering_the_surfaces_imports_no_mcp_sdk_and_the_plugin_stands_for_the_surface() -> None:
    """`canon model diff`, `apply` and `generate` discover every surface; MCP's entry point (`core.mcp.plugin`)
    makes the surface proper, and imports the SDK, only when `/mcp` is served."""
    from core.mcp.plugin import McpPlugin
    from core.mcp.surface import SURFACE, McpSurface

    probe = "import sys; from core.seam.surfaces import discover; discover(); print('mcp' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr
    plugin, proper = McpPlugin(), McpSurface()
    assert (plugin.name, plugin.audit_name, plugin.paths) == (proper.name, SURFACE, proper.paths)
    assert isinstance(plugin.served(), McpSurface)
    assert plugin.served() is plugin.served()


def test_two_surfaces_may_not_overlap() -> None:
    with pytest.raises(ValueError, match=r"'/echo/x' overlaps '/echo/'"):
        _check_paths([Echo(), Echo(name="other", paths=("/echo/x",))])
    _check_paths([Echo(), Echo(name="other", paths=("/other/",))])


@pytest.mark.anyio
async def test_the_app_hands_a_surface_its_paths_unchanged_with_the_caller(instance: Instance) -> None:
    echo = Echo()
    secret = token(instance, "ada", "reader")
    async with asgi(instance, surfaces=[echo]) as http:
        mine = (await http.get("/echo/a/b", headers={"Authorization": f"Bearer {secret}"})).json()
        anonymous = (await http.get("/echo.txt")).json()
        assert (await http.get("/echo.txtx")).status_code == 404
        assert (await http.get("/healthz")).status_code == 200
    assert mine == {"path": "/echo/a/b", "principal": "ada", "tools": len(instance.registry.tools)}
    assert anonymous["principal"] == "anonymous"
    assert len(echo.built) == 1, "the surface app is built once per registry, not per request"


@pytest.mark.anyio
async def test_a_bad_token_on_a_surface_path_is_a_401_problem_and_is_audited(instance: Instance) -> None:
    async with asgi(instance, surfaces=[Echo()]) as http:
        answer = await http.get("/echo/x", headers={"Authorization": "Bearer canon_nope"})
    assert answer.status_code == 401
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert answer.json()["status"] == 401
    assert answer.json()["instance"] == "/echo/x"
    instance.audit.flush()
    records, total = instance.store.audit_records(AuditQuery(surface="echo", outcome="rejected"), before=None, limit=10)
    assert total == 1
    assert [r["target"] for r in records] == ["/echo/x"]


@pytest.mark.anyio
async def test_a_new_registry_rebuilds_the_surface_app(instance: Instance) -> None:
    echo = Echo()
    async with asgi(instance, surfaces=[echo]) as http:
        await http.get("/echo/")
        instance.snapshot = instance.snapshot.evolve(build_registry(instance.model))  # what a model change does
        await http.get("/echo/")
        await http.get("/echo/")
    assert len(echo.built) == 2
    assert echo.built[1] is instance.registry


def test_generate_collects_the_manifest_and_each_surface_s_files_and_refuses_a_clash() -> None:
    files = generate(surfaces=[Echo()])
    assert list(files) == sorted(files)
    assert files["echo.txt"] == "echo\n"
    manifest = json.loads(files[MANIFEST])
    assert [t["name"] for t in manifest["tools"]][:3] == ["search", "describe_model", "get_node"]
    assert generate(surfaces=[Echo()]) == files, "artifacts are deterministic"
    with pytest.raises(ValueError, match=r"echo\.txt"):
        generate(surfaces=[Echo(), Echo(name="twin", paths=("/twin/",))])


def test_check_reports_a_diff_for_a_changed_or_missing_file_and_nothing_when_current(tmp_path: Path) -> None:
    files = {"a.txt": "one\ntwo\n", "b.txt": "three\n"}
    assert [p.name for p in write(files, tmp_path)] == ["a.txt", "b.txt"]
    assert write(files, tmp_path) == []
    assert check(files, tmp_path) == []
    (tmp_path / "a.txt").write_text("one\nTWO\n", encoding="utf-8")
    (tmp_path / "b.txt").unlink()
    diffs = check(files, tmp_path)
    assert len(diffs) == 2
    assert "-TWO\n+two\n" in diffs[0]
    assert "(missing)" in diffs[1]
    assert "+three" in diffs[1]


def test_canon_generate_writes_then_check_passes_and_fails_after_an_edit(tmp_path: Path) -> None:
    out = tmp_path / "reference"
    wrote = run_canon("generate", "--out", str(out), cwd=tmp_path)
    assert wrote.returncode == 0, wrote.stderr
    names = sorted(p.name for p in out.iterdir())
    assert MANIFEST in names
    assert {s.name for s in discover()} == set() or len(names) > 1
    current = run_canon("generate", "--out", str(out), "--check", cwd=tmp_path)
    assert current.returncode == 0, current.stdout + current.stderr
    assert current.stdout == ""
    manifest = out / MANIFEST
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace('"name": "get_node",', '"name": "get_nodes",'), "utf-8"
    )
    stale = run_canon("generate", "--out", str(out), "--check", cwd=tmp_path)
    assert stale.returncode == 1
    lines = stale.stdout.splitlines()
    assert [line[0] + line[1:].strip() for line in lines if line.startswith(("-  ", "+  "))] == [
        '-"name": "get_nodes",', '+"name": "get_node",'
    ]  # fmt: skip
    assert "out of date" in stale.stderr


def test_a_websocket_upgrade_with_a_bad_token_is_refused_before_the_surface(instance: Instance) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    from tests.generators.conftest import live

    with live(instance, surfaces=[Echo()]) as base, pytest.raises(InvalidStatus) as refused:  # noqa: SIM117
        with connect(f"{base.replace('http', 'ws', 1)}/echo/", additional_headers={"Authorization": "Bearer x"}):
            pass
    assert refused.value.response.status_code == 403
    instance.audit.flush()
    records, _ = instance.store.audit_records(AuditQuery(surface="echo", outcome="rejected"), before=None, limit=10)
    assert [r["target"] for r in records] == ["/echo/"]
