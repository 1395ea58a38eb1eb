"""The wheel carries everything canon needs at run time: code, the embedded model, its seed, the schemas and the
docs pages' browser assets with their licences."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from core.http.ui_assets import ASSETS, BUNDLED

REPO = Path(__file__).resolve().parent.parent
DATA_FILES = (
    "schema/default/model.schema.json",
    "schema/default/seed.json",
    "schema/meta/model.schema.json",
    "schema/config/config.schema.json",
    "generators/llms/templates/llms.txt.j2",
    "generators/pages/templates/base.html.j2",
    "generators/pages/static/pages.css",  # the pages surface's one stylesheet: shipped, never from a CDN
    "core/app/cli.py",
)

# Run in the unpacked wheel only: `-S` skips site (and the editable install's .pth that points at the repo), so
# sys.path is the unpacked wheel, then the dependencies' site-packages, then the standard library.
PROBE = """
import json, sys
from pathlib import Path
import core
from core.lang.model import default_seed_path, load_model
model = load_model()
seed = default_seed_path()
print(json.dumps({
    "core": core.__file__, "path": sys.path, "name": model.name, "seed": str(seed), "seed_exists": seed.is_file(),
    "seed_nodes": len(json.loads(seed.read_text(encoding="utf-8"))["nodes"]),
}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(out),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("canon-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_contains_the_code_and_every_schema_file(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())

    assert set(DATA_FILES) <= names
    assert not any(name.startswith("tests/") for name in names)


@pytest.mark.slow
def test_the_wheel_contains_every_ui_asset_and_its_licences(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    shipped = {f"core/http/ui-assets/{path.relative_to(BUNDLED).as_posix()}" for path in BUNDLED.rglob("*")
               if path.is_file()}  # fmt: skip

    assert shipped <= names
    for asset in ASSETS:
        folder = f"core/http/ui-assets/{asset.folder}"
        assert {f"{folder}/{name}" for name in asset.files} <= names
        assert f"{folder}/package.json" in names  # its `license` field, for a package that ships no licence file
    assert {
        f"core/http/ui-assets/{package}/LICENSE"
        for package in ("swagger-ui-dist@5", "react@18.2.0", "react-dom@18.2.0", "js-cookie@3.0.5", "graphiql@3.8.3")
    } <= names


@pytest.mark.slow
def test_the_wheel_declares_the_canon_command(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (entry_points,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = archive.read(entry_points).decode()

    assert "canon = core.app.cli:main" in text


@pytest.mark.slow
def test_the_unpacked_wheel_loads_the_default_model_and_seed_without_the_repository(
    wheel: Path, tmp_path: Path
) -> None:
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacked)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CANON_", "PYTHON"))}
    env["PYTHONPATH"] = os.pathsep.join([str(unpacked), sysconfig.get_paths()["purelib"]])

    result = subprocess.run(
        [sys.executable, "-S", "-c", PROBE], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120
    )

    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert Path(found["core"]).is_relative_to(unpacked)
    assert not any(Path(entry or elsewhere).resolve() == REPO for entry in found["path"])
    assert found["name"] == "northwind"
    assert Path(found["seed"]).is_relative_to(unpacked)
    assert found["seed_exists"] is True
    assert found["seed_nodes"] > 300
