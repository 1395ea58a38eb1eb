"""What the `apply_model` tool plans a model change with: a `ModelPlanner`, handed in by the composition root.

The planner compares the store's model with a new one on every surface and against the stored records, says
whether the change may be applied, and applies it (`core.seam.model_apply.Planner` is canon's). The tool knows it
only by this protocol, so the tools stand below the surfaces whose artifacts the planner compares, and a
dispatcher built without one (nothing to plan against) refuses the tool with a clear error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from core.lang.model import Model

__all__ = ["ModelPlan", "ModelPlanner"]


class ModelPlan(Protocol):
    """A planned model change (`ModelPlanner.plan`)."""

    @property
    def unchanged(self) -> bool:
        """Whether the new model is the store's model already (nothing to apply)."""
        ...

    def report(self) -> dict[str, Any]:
        """The difference on every surface and in the data, as `canon model diff --json` prints it."""
        ...


class ModelPlanner(Protocol):
    """Plans, checks and applies a model change to one store (see the module docstring)."""

    def plan(self, model: Model, *, check: Callable[[], None] | None = None) -> ModelPlan:
        """The plan for making `model` the store's model; nothing is written. `check` is called between its steps
        (a call's deadline): what it raises stops it. A model whose version does not rise is a `ModelError`."""
        ...

    def check(self, plan: ModelPlan, *, allow_breaking: bool = False) -> None:
        """Refuse (`ModelError`) a plan that may not be applied."""
        ...

    def apply(self, plan: ModelPlan, *, principal: str, allow_breaking: bool = False,
              check: Callable[[], None] | None = None) -> int:  # fmt: skip
        """Check and apply `plan` in one transaction, as `principal`; the revision that records it. `check` runs in
        the transaction just before it commits."""
        ...

    def revision(self) -> int:
        """The store's revision now."""
        ...
