"""describe_model: what the graph can hold, and how much it holds; apply_model: change the model (admins)."""

from __future__ import annotations

from typing import Any

from core.dispatch.dispatcher import CallContext, handler
from core.dispatch.registry import type_schema
from core.lang.model import parse_model
from core.values.errors import LimitExceededError, ModelError, Problem, ValidationError


@handler("describe_model")
def describe_model(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    model = ctx.model
    revision, node_counts, edge_counts = ctx.view.counts(ctx.sight)  # what this caller can see, at one revision
    document = model.document
    info: dict[str, Any] = {"id": model.id, "name": model.name, "version": model.version}
    for name in ("summary",):
        if name in document["x-canon-model"]:
            info[name] = document["x-canon-model"][name]
    for name in ("title", "description"):
        if name in document:
            info[name] = document[name]
    info["digest"] = model.digest
    nodes: list[dict[str, Any]] = []
    for t in model.node_types.values():
        entry: dict[str, Any] = {"name": t.name, "description": t.description, "key": t.key, "display": t.display}
        entry |= {k: v for k, v in (("title", t.schema.get("title")), ("icon", t.icon), ("plural", t.plural)) if v}
        entry |= {
            "text": list(t.text),
            "properties": list(t.properties),
            "required": list(t.schema.get("required", [])),
            "default_visibility": t.visibility,
        }
        if t.readers:
            entry["default_readers"] = list(t.readers)
        entry["count"] = node_counts.get(t.name, 0)
        if args.get("include_schemas"):
            entry["schema"] = type_schema(model, t.name)
        nodes.append(entry)
    edges: list[dict[str, Any]] = []
    for e in model.edge_types.values():
        entry = {"name": e.name, "description": e.description, "source": sorted(e.sources),
                 "target": sorted(e.targets), "cardinality": e.cardinality}  # fmt: skip
        if e.inverse:
            entry["inverse"] = e.inverse
        if e.acyclic:
            entry["acyclic"] = True
        entry |= {"properties": list(e.schema["properties"]), "count": edge_counts.get(e.name, 0)}
        if args.get("include_schemas"):
            entry["schema"] = type_schema(model, e.name)
        edges.append(entry)
    return {"model": info, "node_types": nodes, "edge_types": edges, "revision": revision}


@handler("apply_model")
def apply_model(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    """Plan, check and (unless `dry_run`) apply a model with the planner the composition root handed in
    (`core.dispatch.planning`; canon's is `core.seam.model_apply.Planner`, the path `canon model apply` takes); a
    refused model is a validation error whose problems point into the arguments or at stored records. The plan runs
    under the call's time bound, checked last in the store's transaction before it commits: a call answered
    `limit_exceeded` has applied nothing."""
    allow_breaking = bool(args.get("allow_breaking", False))
    try:
        model = parse_model(args["model"], source="apply_model")
        ctx.check_time()
        planner = ctx.models
        plan = planner.plan(model, check=ctx.check_time)
        planner.check(plan, allow_breaking=allow_breaking)
        applied = not (plan.unchanged or args.get("dry_run", False))
        if applied:
            revision = planner.apply(plan, principal=ctx.principal.name, allow_breaking=allow_breaking,
                                     check=ctx.check_time)  # fmt: skip
            ctx.commit.published()  # the model change reaches this process's change listeners (and its snapshot) now
        else:
            revision = planner.revision()
    except ModelError as exc:
        raise ValidationError(str(exc), [_in_arguments(p) for p in exc.problems]) from None
    except LimitExceededError:
        raise LimitExceededError(
            f"Planning and applying the model took more than the call's {ctx.time_limit_s:g} s; nothing was "
            "changed. Apply a model this large with 'canon model apply FILE', which has no call time bound.",
            limit="time_s", value=ctx.time_limit_s,
        ) from None  # fmt: skip
    return {"applied": applied, "unchanged": plan.unchanged, "revision": revision, "plan": plan.report()}


def _in_arguments(problem: Problem) -> Problem:
    """A problem with the model document points into the `model` argument; one with a stored record stays."""
    if problem.file == "apply_model":
        return Problem(f"/model{problem.pointer}", problem.message)
    return Problem(problem.pointer, problem.message)
