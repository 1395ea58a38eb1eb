"""`canon model diff OLD NEW` as a person or a pipeline reads it: every row in the classes' words (a row nothing
changed on reads `none`), and `--fail-on` in their order (none < compatible < needs-data-check < breaking)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import run_canon
from tests.core.test_classification import Document, code_pattern, hosted

EXIT_OK, EXIT_PROBLEMS = 0, 1


def _files(folder: Path, change: Callable[[Document], None], version: str) -> tuple[str, str]:
    (folder / "old.json").write_text(json.dumps(hosted().document), encoding="utf-8")
    (folder / "new.json").write_text(json.dumps(hosted(change, version).document), encoding="utf-8")
    return "old.json", "new.json"


def test_a_version_only_bump_prints_none_on_every_row_and_passes_fail_on_compatible(tmp_path: Path) -> None:
    result = run_canon("model", "diff", "--fail-on", "compatible", *_files(tmp_path, lambda d: None, "1.0.1"),
                       cwd=tmp_path)  # fmt: skip
    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "hosted 1.0.0 -> hosted 1.0.1: none"
    assert sorted(line.split() for line in lines[1:6]) == sorted(
        [row, "none"] for row in ("mcp", "rest", "graphql", "llms", "writes")
    )


@pytest.mark.parametrize(("fail_on", "exit_code"), [("breaking", EXIT_OK), ("needs-data-check", EXIT_PROBLEMS)])
def test_a_pattern_change_canon_cannot_order_is_listed_as_needs_data_check(
    tmp_path: Path, fail_on: str, exit_code: int
) -> None:
    files = _files(tmp_path, code_pattern("^S([0-9][0-9]){3}[0-9]*$"), "1.1.0")
    result = run_canon("model", "diff", "--fail-on", fail_on, *files, cwd=tmp_path)
    assert result.returncode == exit_code, result.stdout + result.stderr
    assert result.stdout.splitlines()[0].endswith(": needs-data-check")
    listed = [line.split()[:2] for line in result.stdout.splitlines() if "pattern changed" in line]
    assert ["needs-data-check", "writes"] in listed
