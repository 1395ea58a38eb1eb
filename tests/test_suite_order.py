"""The suite's own order (tests/conftest.py `SLOW_FIRST`): the slowest files are dealt first, and a name on that
list that is no test file stops the run instead of being passed over."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.conftest as suite
from tests.conftest import REPO, SLOW_FIRST, slow_first_errors


def test_every_slow_first_name_is_a_test_file_named_once() -> None:
    assert slow_first_errors(SLOW_FIRST, REPO) == []
    assert all(Path(name).name.startswith("test_") for name in SLOW_FIRST)


def test_a_missing_or_repeated_name_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_here.py").write_text("", encoding="utf-8")
    names = ("tests/test_here.py", "tests/test_gone.py", "tests/test_here.py")
    assert slow_first_errors(names, tmp_path) == [
        "tests/test_gone.py: no such test file",
        "tests/test_here.py: named 2 times",
    ]


def test_a_wrong_name_stops_the_run(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    monkeypatch.setattr(suite, "SLOW_FIRST", (*SLOW_FIRST, "tests/test_renamed_away.py"))
    with pytest.raises(pytest.UsageError, match=r"SLOW_FIRST: tests/test_renamed_away\.py: no such test file"):
        suite.pytest_collection_modifyitems(request.config, [])


def test_the_slow_files_come_first_in_their_order(request: pytest.FixtureRequest) -> None:
    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    items = [Item("tests/test_a.py::one"), Item(f"{SLOW_FIRST[1]}::x"), Item("tests/test_a.py::two"),
             Item(f"{SLOW_FIRST[0]}::y"), Item(f"{SLOW_FIRST[1]}::z")]  # fmt: skip
    suite.pytest_collection_modifyitems(request.config, items)  # pyright: ignore[reportArgumentType]
    assert [i.nodeid for i in items] == [f"{SLOW_FIRST[0]}::y", f"{SLOW_FIRST[1]}::x", f"{SLOW_FIRST[1]}::z",
                                         "tests/test_a.py::one", "tests/test_a.py::two"]  # fmt: skip
