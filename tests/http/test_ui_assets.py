"""The browser assets canon ships (`core.http.ui_assets`) are the pinned npm packages' files, byte for byte, with
their licences: a version bump in tests/browser/package-lock.json without `python -m core.http.ui_assets` fails here.

tests/browser/node_modules is installed by scripts/test from the lockfile (as for the browser tests, which skip with
them only when CANON_SKIP_BROWSER_TESTS=1).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from core.http.ui_assets import ASSETS, BUNDLED, copy_assets

BROWSER_DIR = Path(__file__).resolve().parent.parent / "browser"
NODE_MODULES = BROWSER_DIR / "node_modules"


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The assets as `python -m core.http.ui_assets` copies them from the packages the lockfile pins."""
    if os.environ.get("CANON_SKIP_BROWSER_TESTS") == "1":
        pytest.skip("CANON_SKIP_BROWSER_TESTS=1: tests/browser/node_modules is not installed")
    lock = hashlib.sha256((BROWSER_DIR / "package-lock.json").read_bytes()).hexdigest()
    stamp = NODE_MODULES / ".installed-from-lockfile"  # written by scripts/test
    if not stamp.is_file() or stamp.read_text().strip() != lock:
        pytest.fail("tests/browser/node_modules was not installed by scripts/test from the current lockfile")
    target = tmp_path_factory.mktemp("pinned") / "ui-assets"
    copy_assets(NODE_MODULES, target)
    return target


def _files(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def test_the_shipped_assets_are_the_pinned_packages_files_byte_for_byte(pinned: Path) -> None:
    shipped, expected = _files(BUNDLED), _files(pinned)
    assert sorted(shipped) == sorted(expected)
    assert [name for name in expected if shipped[name] != expected[name]] == []


def test_every_page_file_ships_with_its_package_licence() -> None:
    for asset in ASSETS:
        folder = BUNDLED / asset.folder
        assert all((folder / name).is_file() for name in asset.files), asset.folder
        licence = [name for name in ("LICENSE", "package.json") if (folder / name).is_file()]
        assert licence, f"{asset.folder} ships no licence"
