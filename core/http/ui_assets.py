"""The browser assets canon ships: the scripts and styles of Swagger UI (`/docs`) and GraphiQL (`/graphql`).

The files live in the `ui-assets` folder next to this module (package data, so they are in the wheel), laid out as
the pages' URLs name them: `<npm package>@<version>/<file>`, each package with its licence files. The host serves
that folder at `/ui-assets/` unless `[server] ui_assets` names another, so the pages work with no internet.

They are copied from the npm packages tests/browser pins (package-lock.json), never edited: `python -m
core.http.ui_assets` copies them again after a version change, and a test checks that the copies match the pinned
packages byte for byte (docs/decisions/0027-ui-assets-in-the-wheel.md says why they are committed).
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ASSETS", "BUNDLED", "Asset", "copy_assets"]

BUNDLED = Path(__file__).resolve().parent / "ui-assets"
LICENCE_NAMES = ("LICENSE", "LICENSE.md", "LICENSE.txt", "NOTICE", "package.json")  # package.json: its `license`


@dataclass(frozen=True)
class Asset:
    """One npm package's files that a page loads, and the `package@version` folder its URLs name."""

    package: str
    version: str  # as the page's URL names it: exact, or a major version (FastAPI's Swagger UI page asks for @5)
    files: tuple[str, ...]

    @property
    def folder(self) -> str:
        return f"{self.package}@{self.version}"

    def licences(self, installed: Path) -> tuple[str, ...]:
        """The licence files of the package installed at `installed` (its folder): those at its top, and the
        third-party notices a bundle ships beside a file it loads."""
        beside = tuple(f"{name}.LICENSE.txt" for name in self.files if (installed / f"{name}.LICENSE.txt").is_file())
        return (*(name for name in LICENCE_NAMES if (installed / name).is_file()), *beside)


ASSETS = (
    Asset("swagger-ui-dist", "5", ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")),
    # strawberry's GraphiQL page (static/graphiql.html); its SRI hashes match these npm files byte for byte
    Asset("react", "18.2.0", ("umd/react.production.min.js",)),
    Asset("react-dom", "18.2.0", ("umd/react-dom.production.min.js",)),
    Asset("js-cookie", "3.0.5", ("dist/js.cookie.min.js",)),
    Asset("graphiql", "3.8.3", ("graphiql.min.css", "graphiql.min.js")),
    Asset("@graphiql/plugin-explorer", "1.0.2", ("dist/style.css", "dist/index.umd.js")),
)


def copy_assets(node_modules: Path, target: Path) -> list[Path]:
    """Copy every asset and its package's licence files from `node_modules` into `target` (replacing what is
    there); returns the files written. A package at another version than its URL names is an error."""
    if target.exists():
        shutil.rmtree(target)
    written: list[Path] = []
    for asset in ASSETS:
        installed = node_modules / asset.package
        found = str(json.loads((installed / "package.json").read_text())["version"])
        if asset.version not in (found, found.split(".")[0]):
            raise ValueError(f"{asset.package} is {found} in {node_modules}; the pages load {asset.folder}")
        for name in (*asset.files, *asset.licences(installed)):
            destination = target / asset.folder / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(installed / name, destination)
            written.append(destination)
    return written


if __name__ == "__main__":  # python -m core.http.ui_assets [NODE_MODULES]: copy the pinned packages' files again
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("tests/browser/node_modules")
    for path in copy_assets(source, BUNDLED):
        print(path.relative_to(BUNDLED))
