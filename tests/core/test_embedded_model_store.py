"""A store made on the embedded model of an earlier canon keeps serving the model it records.

With no `[model] path`, the embedded model only makes new stores. An existing store is the truth about its own model
(only `apply_model` changes it, ADR 0038): after an upgrade whose embedded model differs, `canon serve` must start
on the store's model, not refuse it and tell the operator to overwrite a file inside canon's package.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from core.app.cli import _check_served_model  # pyright: ignore[reportPrivateUsage]
from core.lang.model import Model, load_model, parse_model
from core.ops.config import Config
from core.seam.instance import open_instance
from core.store import open_store

pytestmark = pytest.mark.both_backends


def _earlier_embedded_model() -> Model:
    """The embedded model as an earlier canon shipped it: the same name, another document."""
    document = copy.deepcopy(load_model().document)
    document["$defs"]["Team"]["properties"]["motto"] = {"type": "string", "description": "An earlier property."}
    return parse_model(document, source="earlier canon")


def test_a_store_on_an_earlier_embedded_model_opens_on_its_own_model(
    store_location: str | Path, tmp_path: Path
) -> None:
    earlier = _earlier_embedded_model()
    assert earlier.digest != load_model().digest
    open_store(store_location, earlier).close()
    config = Config(store=store_location, tokens=tmp_path / "tokens.json")

    _check_served_model(config, follow=False)  # canon serve's check: nothing configured to differ from
    instance = open_instance(config)
    try:
        assert instance.model.digest == earlier.digest
        assert "motto" in instance.model.node_types["Team"].schema["properties"]
        assert next(iter(instance.store.iter_nodes()), None) is None  # an existing store is never seeded
    finally:
        instance.close()


def test_a_configured_model_file_that_differs_is_still_refused(store_location: str | Path, tmp_path: Path) -> None:
    """The rule above is for the embedded model only: a model file the operator names is compared as before."""
    open_store(store_location, _earlier_embedded_model()).close()
    model_file = tmp_path / "model.json"
    model_file.write_text((Path(load_model().source)).read_text())
    config = Config(store=store_location, tokens=tmp_path / "tokens.json", model=model_file)

    with pytest.raises(Exception, match="neither that model nor one the store had before"):
        _check_served_model(config, follow=False)
