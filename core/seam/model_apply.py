"""Applying a model to a store: the plan, and the one rule of which model changes may be applied.

`plan_apply` is `canon model diff` against the store (`core.seam.model_diff.diff_models`: every surface's findings and
the stored records the new model refuses); `check_plan` says whether it may be applied; `apply_plan` checks it and
hands the model to `Store.apply_model`, which applies it in one transaction. `Planner` is the three over one store:
the `core.dispatch.planning.ModelPlanner` the composition root (`core.seam.instance`, the CLI) hands to the
`apply_model` tool. `canon model apply` and the tool both go through here, so both surfaces refuse exactly the same
changes:

* the same model (`$id`) must have a higher version (`core.lang.model_version.check_successor`);
* a breaking change (on any surface) needs a higher major version, or `allow_breaking`;
* every stored record must be valid under the new model (refused: the ids and pointers of a sample).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.dispatch.planning import ModelPlan
from core.lang.model import Model
from core.lang.model_version import check_successor, semver
from core.seam.model_diff import ModelDiff, Progress, diff_models
from core.store import Store
from core.values.errors import ModelError, Problem

__all__ = ["ApplyPlan", "Planner", "apply_plan", "check_plan", "plan_apply"]


@dataclass(frozen=True)
class ApplyPlan:
    """What applying `model` in place of the store's `current` model does (`diff`, with its data impact)."""

    current: Model
    model: Model
    diff: ModelDiff

    @property
    def unchanged(self) -> bool:
        return self.current.digest == self.model.digest

    @property
    def major(self) -> bool:
        """Whether the new model is another model or a higher major version of the same one."""
        return self.current.id != self.model.id or semver(self.model.version)[0] > semver(self.current.version)[0]

    def summary(self) -> dict[str, Any]:
        """What the model history keeps of this change: the classification per surface and the number of findings
        of each classification."""
        counts: dict[str, int] = {}
        for f in self.diff.findings:
            counts[f.classification] = counts.get(f.classification, 0) + 1
        surfaces = {s: self.diff.classification(s) for s in self.diff.surfaces}
        return {"from": self.diff.old, "to": self.diff.new, "classification": self.diff.classification(),
                "surfaces": surfaces, "findings": counts}  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {"unchanged": self.unchanged, **self.diff.as_dict()}

    def report(self) -> dict[str, Any]:
        """The difference on every surface and in the data (`ModelDiff.as_dict`)."""
        return self.diff.as_dict()


def plan_apply(store: Store, model: Model, *, check: Callable[[], None] | None = None,
               progress: Progress | None = None) -> ApplyPlan:  # fmt: skip
    """The plan for applying `model` to `store`: its current model diffed against `model`, every stored record
    checked (nothing is written), telling `progress` how far (`diff_models`). A model whose version does not rise
    is refused at once (`ModelError`). `check` is called between the plan's steps (a call's deadline,
    `CallContext.check_time`): what it raises stops it."""
    current = store.follow_model()
    if current.digest == model.digest:  # nothing to compare: no surface or record changes
        label = f"{model.name} {model.version}"
        return ApplyPlan(current, model, ModelDiff(label, label, (), ()))
    check_successor(current.document, model)  # a version that does not rise is refused before the costly diff
    return ApplyPlan(current, model, diff_models(current, model, store, check=check, progress=progress))


def check_plan(plan: ApplyPlan, *, allow_breaking: bool = False) -> None:
    """Refuse (`ModelError`) a plan that may not be applied; see the module docstring."""
    if plan.unchanged:
        return
    check_successor(plan.current.document, plan.model)
    source = plan.model.source
    version = Problem("/x-canon-model/version", f"a breaking change needs a major version above "
                      f"{plan.current.version}", file=source)  # fmt: skip
    if plan.diff.classification() == "breaking" and not plan.major and not allow_breaking:
        raise ModelError(
            f"The change from {plan.diff.old} to {plan.diff.new} breaks at least one surface "
            f"({', '.join(s for s in plan.diff.surfaces if plan.diff.classification(s) == 'breaking')}); give the "
            f"model a higher major version or allow breaking changes explicitly. Nothing was changed.",
            [version],
        )
    data = plan.diff.data
    if data is not None and data.refused:
        raise ModelError(
            f"{data.refused} of {data.checked} stored record(s) (nodes and edges) are not valid under "
            f"{plan.diff.new}; fix the data or the model first. Nothing was changed.",
            [Problem(f"{record}{at}", message, file=source) for record, at, message in data.sample],
        )


def apply_plan(store: Store, plan: ApplyPlan, *, principal: str, allow_breaking: bool = False,
               check: Callable[[], None] | None = None) -> int:  # fmt: skip
    """Check `plan` and apply its model in one transaction, as `principal`; returns the revision that records it.
    Refused if another process applied a model after the plan was made. `check` runs in the transaction just
    before it commits (`Store.apply_model`): a call whose deadline passed by then applies nothing."""
    check_plan(plan, allow_breaking=allow_breaking)
    if plan.unchanged:
        return store.revision()
    return store.apply_model(plan.model, principal=principal, replaces=plan.current.digest, summary=plan.summary(),
                             check=check)  # fmt: skip


@dataclass(frozen=True)
class Planner:
    """`plan_apply`, `check_plan` and `apply_plan` over `store`: canon's `core.dispatch.planning.ModelPlanner`."""

    store: Store

    def plan(self, model: Model, *, check: Callable[[], None] | None = None,
             progress: Progress | None = None) -> ApplyPlan:  # fmt: skip
        return plan_apply(self.store, model, check=check, progress=progress)

    def check(self, plan: ModelPlan, *, allow_breaking: bool = False) -> None:
        check_plan(self._own(plan), allow_breaking=allow_breaking)

    def apply(self, plan: ModelPlan, *, principal: str, allow_breaking: bool = False,
              check: Callable[[], None] | None = None) -> int:  # fmt: skip
        return apply_plan(self.store, self._own(plan), principal=principal, allow_breaking=allow_breaking, check=check)

    def revision(self) -> int:
        return self.store.revision()

    @staticmethod
    def _own(plan: ModelPlan) -> ApplyPlan:
        if not isinstance(plan, ApplyPlan):
            raise TypeError(f"a plan this planner made, not {type(plan).__name__}")
        return plan
