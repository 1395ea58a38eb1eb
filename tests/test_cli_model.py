"""The model is changed only on purpose: read-only commands, `canon serve`, `canon model diff`, `canon model apply`,
`canon model log` and `canon model show`, run as a user runs them."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

from core.lang.model import default_model_path, load_model
from tests.conftest import run_canon

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_STORE = 0, 1, 2, 3


def _model_file(folder: Path, name: str, change: Any) -> Path:
    document = copy.deepcopy(dict(load_model(default_model_path()).document))
    change(document)
    path = folder / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _without_team_founded(document: dict[str, Any]) -> None:
    document["x-canon-model"]["version"] = "2.0.0"
    del document["$defs"]["Team"]["properties"]["founded"]


def _with_team_budget(document: dict[str, Any]) -> None:
    document["x-canon-model"]["version"] = "1.1.0"
    document["$defs"]["Team"]["properties"]["budget"] = {"description": "Yearly budget.", "type": "integer"}


def _narrower_team_name(document: dict[str, Any]) -> None:
    """A breaking change (a shorter maximum) that every seeded team still fits, without a major version."""
    document["x-canon-model"]["version"] = "1.1.0"
    document["$defs"]["Team"]["properties"]["name"]["maxLength"] = 60


def _same_version_budget(document: dict[str, Any]) -> None:
    _with_team_budget(document)
    document["x-canon-model"]["version"] = "1.0.0"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("seeded")
    assert run_canon("init", cwd=folder).returncode == EXIT_OK
    _model_file(folder, "breaking.json", _without_team_founded)
    _model_file(folder, "compatible.json", _with_team_budget)
    _model_file(folder, "narrower.json", _narrower_team_name)
    _model_file(folder, "same-version.json", _same_version_budget)
    return folder


@pytest.fixture
def copied(seeded: Path, tmp_path: Path) -> Path:
    """A copy of the seeded folder (store and model files) a test may change."""
    for path in seeded.iterdir():
        if path.is_file():
            (tmp_path / path.name).write_bytes(path.read_bytes())
    return tmp_path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command", [("stats",), ("export", "-"), ("audit",)])
@pytest.mark.parametrize("model", ["breaking.json", "compatible.json"])
def test_read_only_commands_leave_the_store_byte_identical_whatever_model_file_is_given(
    seeded: Path, command: tuple[str, ...], model: str
) -> None:
    before = _digest(seeded / "canon.db")
    result = run_canon("--model", model, *command, cwd=seeded)
    assert result.returncode == EXIT_OK, result.stderr
    assert _digest(seeded / "canon.db") == before


def test_stats_reports_the_store_s_model_not_the_model_file(seeded: Path) -> None:
    result = run_canon("--model", "compatible.json", "stats", cwd=seeded)
    assert json.loads(result.stdout)["model"]["version"] == "1.0.0"


@pytest.mark.parametrize("command", [("stats",), ("export", "-"), ("audit",)])
def test_a_mistyped_store_path_is_an_error_naming_it_and_creates_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    result = run_canon("--store", "canon.dbb", *command, cwd=tmp_path)
    assert result.returncode == EXIT_STORE
    assert "canon.dbb" in result.stderr
    assert "canon init" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_serve_refuses_a_model_file_that_differs_from_the_store_s(seeded: Path) -> None:
    before = _digest(seeded / "canon.db")
    result = run_canon("--model", "compatible.json", "serve", "--port", "0", cwd=seeded)
    assert result.returncode == EXIT_USAGE
    assert "canon model diff" in result.stderr
    assert _digest(seeded / "canon.db") == before


def test_serve_following_the_model_refuses_a_breaking_change(seeded: Path) -> None:
    before = _digest(seeded / "canon.db")
    result = run_canon("--model", "breaking.json", "serve", "--port", "0", "--follow-model", cwd=seeded)
    assert result.returncode == EXIT_USAGE
    assert "breaking" in result.stderr
    assert _digest(seeded / "canon.db") == before


def test_model_diff_fails_on_breaking_and_names_the_removed_property_on_every_surface(seeded: Path) -> None:
    result = run_canon("model", "diff", "--json", "--fail-on", "breaking", "breaking.json", cwd=seeded)
    assert result.returncode == EXIT_PROBLEMS, result.stderr
    report = json.loads(result.stdout)
    assert report["surfaces"] == {
        "mcp": "breaking",
        "rest": "breaking",
        "graphql": "breaking",
        "llms": "none",
        "writes": "breaking",
    }  # fmt: skip  (a write sending it is refused everywhere; llms.txt, which lists types, not properties, is the same)
    assert report["data"]["refused"] > 0  # the seed's teams have 'founded'
    assert report["data"]["sample"][0]["id"].startswith("/")


def test_model_diff_of_an_added_optional_property_passes_fail_on_breaking(seeded: Path) -> None:
    result = run_canon("model", "diff", "--fail-on", "breaking", str(default_model_path()), "compatible.json",
                       cwd=seeded)  # fmt: skip
    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    assert ": compatible" in result.stdout.splitlines()[0]


@pytest.mark.parametrize("command", [("diff",), ("apply", "--dry-run")])
def test_model_diff_and_apply_show_their_long_phases_on_stderr_and_nothing_off_a_terminal(
    seeded: Path, command: tuple[str, ...]
) -> None:
    stats = json.loads(run_canon("stats", cwd=seeded).stdout)
    records = stats["nodes"] + stats["edges"]

    shown = run_canon("model", *command, "compatible.json", "--progress", cwd=seeded)
    quiet = run_canon("model", *command, "compatible.json", cwd=seeded)  # stderr is a pipe: no terminal

    assert shown.returncode == quiet.returncode == EXIT_OK, shown.stderr + quiet.stderr
    drawn = [line.strip() for line in shown.stderr.replace("\r", "\n").splitlines() if line.strip()]
    rendered = [line for line in drawn if line.startswith("rendering:")]
    assert rendered, drawn
    assert re.search(r"^rendering: 100%.* 2/2 \[\d\d:\d\d<00:00, +[\d.]+ models/s\]$", rendered[-1]), rendered
    last = drawn[-1]
    assert re.search(rf"^checking: 100%.* {records}/{records} \[\d\d:\d\d<00:00, +[\d.]+ records/s\]$", last), last
    assert quiet.stderr == ""
    assert quiet.stdout == shown.stdout


def test_model_apply_shows_the_store_s_own_check_of_every_record_as_a_phase(copied: Path) -> None:
    stats = json.loads(run_canon("stats", cwd=copied).stdout)
    records = stats["nodes"] + stats["edges"]

    applied = run_canon("model", "apply", "--yes", "--progress", "compatible.json", cwd=copied)

    assert applied.returncode == EXIT_OK, applied.stderr
    drawn = [line.strip() for line in applied.stderr.replace("\r", "\n").splitlines() if line.strip()]
    assert [line.split(":")[0] for line in drawn if line.startswith(("applying", "checking"))][-1] == "applying"
    assert re.search(rf"^applying: 100%.* {records}/{records} \[", drawn[-1]), drawn[-1]


def _follow_config(folder: Path, model: str) -> None:
    (folder / "canon.toml").write_text(f'[model]\npath = "{model}"\nfollow = true\n', encoding="utf-8")


def test_serve_with_follow_in_the_config_refuses_a_breaking_change(tmp_path: Path, seeded: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    for name in ("canon.db", "breaking.json"):
        (folder / name).write_bytes((seeded / name).read_bytes())
    _follow_config(folder, "breaking.json")
    before = _digest(folder / "canon.db")
    result = run_canon("serve", "--port", "0", cwd=folder)
    assert result.returncode == EXIT_USAGE
    assert "--follow-model adopts only compatible changes" in result.stderr
    assert _digest(folder / "canon.db") == before


def test_serve_with_follow_in_the_config_starts_on_a_compatible_change_and_the_store_adopts_it(
    tmp_path: Path, seeded: Path
) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    for name in ("canon.db", "compatible.json"):
        (folder / name).write_bytes((seeded / name).read_bytes())
    _follow_config(folder, "compatible.json")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CANON_")}
    command = [sys.executable, "-m", "core.app.cli", "serve", "--stdio"]
    served = subprocess.run(command, cwd=folder, env=clean, stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=120, check=False)  # fmt: skip
    assert served.returncode == EXIT_OK, served.stderr  # started, served stdin until its end
    stats = run_canon("stats", cwd=folder)
    assert json.loads(stats.stdout)["model"]["version"] == "1.1.0"


def test_model_apply_applies_a_compatible_change_and_log_show_and_audit_record_it(copied: Path) -> None:
    before = json.loads(run_canon("stats", cwd=copied).stdout)["revision"]
    applied = run_canon("model", "apply", "--yes", "--json", "compatible.json", cwd=copied)
    assert applied.returncode == EXIT_OK, applied.stderr
    report = json.loads(applied.stdout)
    assert report["applied"] is True
    assert report["revision"] == before + 1
    assert report["plan"]["classification"] == "compatible"
    assert json.loads(run_canon("stats", cwd=copied).stdout)["model"]["version"] == "1.1.0"

    log_lines = run_canon("model", "log", "--json", "--store", "canon.db", cwd=copied).stdout.splitlines()
    log = [json.loads(line) for line in log_lines]
    assert [(e["version"], e["principal"]) for e in log] == [("1.0.0", "local"), ("1.1.0", "local")]
    assert log[-1]["revision"] == before + 1
    assert log[-1]["summary"]["classification"] == "compatible"
    assert log[-1]["summary"]["surfaces"]["graphql"] == "compatible"
    old = json.loads(run_canon("model", "show", "--at", str(before), cwd=copied).stdout)
    new = json.loads(run_canon("model", "show", cwd=copied).stdout)
    assert "budget" not in old["$defs"]["Team"]["properties"]
    assert "budget" in new["$defs"]["Team"]["properties"]
    audit = run_canon("audit", "--target", "apply_model", "--json", cwd=copied)
    (record,) = [json.loads(line) for line in audit.stdout.splitlines()]
    assert (record["principal"], record["surface"], record["outcome"], record["revision"]) == (
        "local", "cli", "ok", before + 1)  # fmt: skip


def test_model_apply_shows_the_plan_and_changes_nothing_unless_confirmed(copied: Path) -> None:
    before = _digest(copied / "canon.db")
    result = run_canon("model", "apply", "compatible.json", cwd=copied)  # standard input is no terminal
    assert result.returncode == EXIT_USAGE
    assert "--yes" in result.stderr
    assert ": compatible" in result.stdout.splitlines()[0]  # the plan was shown
    dry = run_canon("model", "apply", "--dry-run", "compatible.json", cwd=copied)
    assert dry.returncode == EXIT_OK, dry.stderr
    assert _digest(copied / "canon.db") == before


def test_model_apply_refuses_a_breaking_change_without_a_major_version_unless_allowed(copied: Path) -> None:
    before = _digest(copied / "canon.db")
    refused = run_canon("model", "apply", "--yes", "narrower.json", cwd=copied)
    assert refused.returncode == EXIT_PROBLEMS
    assert "/x-canon-model/version" in refused.stderr
    assert _digest(copied / "canon.db") == before
    allowed = run_canon("model", "apply", "--yes", "--allow-breaking", "narrower.json", cwd=copied)
    assert allowed.returncode == EXIT_OK, allowed.stderr
    assert json.loads(run_canon("stats", cwd=copied).stdout)["model"]["version"] == "1.1.0"


def test_model_apply_refuses_a_model_stored_records_break_naming_them_and_changes_nothing(copied: Path) -> None:
    before = _digest(copied / "canon.db")
    result = run_canon("model", "apply", "--yes", "breaking.json", cwd=copied)  # 2.0.0: major, but teams have 'founded'
    assert result.returncode == EXIT_PROBLEMS
    assert "stored record(s) (nodes and edges) are not valid" in result.stderr
    assert "team-security/properties: 'founded' is not allowed" in result.stderr  # records and pointers named
    assert _digest(copied / "canon.db") == before


def test_model_apply_refuses_a_changed_model_with_the_same_version(copied: Path) -> None:
    before = _digest(copied / "canon.db")
    result = run_canon("model", "apply", "--yes", "same-version.json", cwd=copied)
    assert result.returncode == EXIT_PROBLEMS
    assert "/x-canon-model/version" in result.stderr
    assert _digest(copied / "canon.db") == before


def test_init_with_a_differing_model_file_refuses_and_says_to_apply_it(copied: Path) -> None:
    before = _digest(copied / "canon.db")
    result = run_canon("--model", "compatible.json", "init", cwd=copied)
    assert result.returncode == EXIT_PROBLEMS
    assert "canon model apply compatible.json" in result.stderr
    assert _digest(copied / "canon.db") == before


# -- the restart after an apply ----------------------------------------------------------------------------------------
@pytest.mark.both_backends
def test_serve_restarted_after_a_model_apply_serves_the_applied_model_in_every_worker_and_says_how_to_update_the_file(
    store_location: str | Path, tmp_path: Path
) -> None:
    """`canon serve` with the canon.toml it started with (whose model file is now an older model of the store's
    history) starts on the store's model instead of refusing to start: under `Restart=on-failure`, no crash loop."""
    from tests.mcp.conftest import serving

    _model_file(tmp_path, "model.json", lambda document: None)
    _model_file(tmp_path, "compatible.json", _with_team_budget)
    (tmp_path / "canon.toml").write_text('[model]\npath = "model.json"\n', encoding="utf-8")
    store = str(store_location)
    assert run_canon("--store", store, "init", cwd=tmp_path).returncode == EXIT_OK
    applied = run_canon("--store", store, "model", "apply", "compatible.json", "--yes", cwd=tmp_path)
    assert applied.returncode == EXIT_OK, applied.stderr

    with serving(store, "--workers", "2", cwd=tmp_path) as process:
        with httpx2.Client(base_url=process.base, timeout=30) as http:
            schema = http.get("/openapi.json").json()["components"]["schemas"]
        assert "budget" in schema["Team"]["properties"]
        warnings = [line for line in process.output().splitlines() if "canon model show > " in line]
    # one from the serving process and one from each worker: each opened the store through `open_instance`
    assert len(warnings) == 3, warnings
    assert "model.json" in warnings[0]
    assert "[model] path" in warnings[0]


def test_serve_with_an_unknown_model_file_names_both_fixes(seeded: Path) -> None:
    unknown = _model_file(seeded.parent, "unknown.json", lambda d: d.update({"$id": "https://example.com/x.json"}))
    result = run_canon("--model", str(unknown), "serve", "--port", "0", cwd=seeded)
    assert result.returncode == EXIT_USAGE
    assert f"canon model show > {unknown}" in result.stderr
    assert f"canon model apply {unknown}" in result.stderr
