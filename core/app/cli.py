"""The `canon` command line.

Exit codes: 0 success; 1 the input (model, data) has problems, each printed as `file:line: /pointer: message`;
2 usage or configuration error; 3 the store cannot be opened or written; 141 the reader of standard output went
away (`canon export - | head`), said nowhere, as a Unix tool stopped by SIGPIPE.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import __version__
from core.dispatch.dispatcher import OUTCOMES
from core.lang.model import check_model, default_model_path, load_model
from core.lang.schema_diff import BREAKING, CLASSES, COMPATIBLE, NONE
from core.ops.config import Config, effective_settings, load_config, store_location
from core.ops.tokens import token_file
from core.seam.instance import open_instance
from core.store import Store, copy_store, open_existing_store, store_exists
from core.store.common import model_differs, utc_now
from core.store.interchange import export_graph, import_path
from core.store.retention import Retention
from core.values.audit import AuditRecord
from core.values.errors import CanonError, ConfigError, ModelError, NotFoundError, Problem, StoreError, ValidationError
from core.values.progress import ProgressBar

if TYPE_CHECKING:
    from core.mcp.options import ServeOptions
    from core.seam.surfaces import Surface

__all__ = ["main"]

EXIT_PROBLEMS, EXIT_USAGE, EXIT_STORE = 1, 2, 3
EXIT_PIPE = 128 + signal.SIGPIPE  # what a shell reports for a tool the closed pipe stopped (141)
CLI_PRINCIPAL = "local"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        status = _run(argv)
        sys.stdout.flush()  # so a reader that went away shows here, not as a traceback at interpreter exit
        return status
    except BrokenPipeError:  # `canon export - | head`: stop quietly, as a Unix tool stopped by SIGPIPE does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush of stdout must not fail again
        os.close(devnull)
        return EXIT_PIPE


def _run(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except (ModelError, ValidationError) as exc:
        _print_problems(str(exc), exc.problems)
        return EXIT_PROBLEMS
    except ConfigError as exc:
        print(f"canon: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (StoreError, NotFoundError) as exc:
        print(f"canon: {exc}", file=sys.stderr)
        return EXIT_STORE
    except CanonError as exc:
        print(f"canon: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="canon",
        description="A knowledge server for an organisation's canonical model: one typed property graph, "
        "defined in JSON Schema 2020-12 and served natively over MCP.",
        epilog="Configuration comes from --config, $CANON_CONFIG or ./canon.toml; $CANON_STORE and $CANON_MODEL "
        "override the store and model paths. With no configuration canon uses ./canon.db and the embedded "
        "model, seeded with sample data. 'canon COMMAND --help' describes each command.",
    )
    parser.add_argument("--version", action="version", version=f"canon {__version__}")
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="configuration file (default: ./canon.toml if present)"
    )
    parser.add_argument("--store", type=store_location, metavar="PATH|URL",
                        help="store file or postgresql:// URL (overrides the configuration)")  # fmt: skip
    parser.add_argument("--model", type=Path, metavar="FILE", help="model file (overrides the configuration)")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    def command(name: str, handler: Callable[[argparse.Namespace], int], help_: str, description: str) -> Any:
        p = sub.add_parser(name, help=help_, description=description)
        p.set_defaults(handler=handler)
        return p

    command("init", _init, "create the store (seeded when on the embedded model)",
            "Create the store if it does not exist and record the model in it. A new store on the embedded model "
            "is seeded with its sample organisation. Safe to run again.")  # fmt: skip
    p = command("validate", _validate, "check a model file and list every problem",
                "Check a model against canon's meta-schema and rules; print every problem as "
                "file: /json/pointer: message and exit 1 if there is any. "
                "Without MODEL, checks the configured model.")  # fmt: skip
    p.add_argument("model_file", nargs="?", type=Path, metavar="MODEL", help="the model file (JSON or YAML)")
    p = command("import", _import, "import nodes and edges (all or nothing)",
                "Import JSON, JSON Lines or YAML files, or a directory of them, in one transaction. Every problem in "
                "every file is listed with its file, line or JSON pointer; "
                "nothing is written unless there are none.")  # fmt: skip
    p.add_argument(
        "path", type=Path, metavar="PATH", help="a .json, .jsonl, .ndjson, .yaml or .yml file, or a directory"
    )
    p.add_argument("--dry-run", action="store_true", help="check everything, write nothing")
    _progress_option(p)
    p = command("export", _export, "write every node and edge to a file",
                "Write the whole graph in a stable order. The format follows the extension (.json, .jsonl or "
                ".ndjson, .yaml or .yml; any other is refused) or --format; the folder must exist; '-' writes to "
                "standard output. export, import into an empty store, export again "
                "gives identical bytes.")  # fmt: skip
    p.add_argument("path", metavar="PATH", help="output file, or - for standard output")
    p.add_argument("--format", choices=("json", "jsonl", "yaml"), help="output format (default: from the extension)")
    p = command("serve", _serve, "serve the graph over MCP, REST, GraphQL and llms.txt (or MCP on stdio)",
                "Serve MCP over Streamable HTTP at http://HOST:PORT/mcp (both protocol revisions, 2025-11-25 and "
                "2026-07-28), with /healthz, and on the same port every installed surface generated from the same "
                "definitions: REST at /api (OpenAPI at /openapi.json, docs at /docs), GraphQL at /graphql, and "
                "/llms.txt for crawlers. With --stdio, serve MCP on stdin/stdout instead (logs go to stderr). A new "
                "store on the embedded model is created and seeded first.")  # fmt: skip
    p.add_argument("--stdio", action="store_true", help="serve MCP on stdin/stdout instead of HTTP")
    p.add_argument("--host", help="bind address (default: 127.0.0.1, or the configuration's)")
    p.add_argument("--port", type=int, help="port (default: 8000, or the configuration's; 0 picks a free port)")
    p.add_argument("--profile", choices=("full", "agent"), default="full",
                   help="agent: hide advanced tools from tools/list (they stay callable)")  # fmt: skip
    p.add_argument("--tool-prefix", default="", metavar="PREFIX",
                   help="list tools as PREFIX+name (canon_ → canon_get_node), the only names accepted")  # fmt: skip
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                   help="stderr log level (default: info)")  # fmt: skip
    p.add_argument("--follow-model", action="store_true",
                   help="development: adopt a changed model file if no surface breaks and every stored record fits "
                   "(otherwise a differing model file is refused)")  # fmt: skip
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="HTTP worker processes sharing the port (default: 1); 2026-07-28 requests go to any "
                   "worker, a 2025-11-25 session stays in the worker that opened it")  # fmt: skip
    p = command("generate", _generate, "write (or --check) the reference artifacts every surface generates",
                "Generate the reference artifacts of the configured model (by default the embedded one) from the "
                "registry: the tool and resource manifest and every installed surface's (OpenAPI document, GraphQL "
                "SDL, llms.txt), into DIR. With --check, write nothing: print a diff and exit 1 if any file "
                "differs from what would be generated (CI runs this, so no surface can drift unnoticed).")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("docs/reference"), metavar="DIR",
                   help="where the artifacts go (default: docs/reference)")  # fmt: skip
    p.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on any difference")
    command("stats", _stats, "show the store's revision, counts and size",
            "Print the store location, its revision, node and edge counts per type, "
            "and its size, as JSON.")  # fmt: skip
    command("config", _show_config, "show the effective configuration",
            "Print the effective configuration as JSON, with where each value came from.")  # fmt: skip
    p = command("synth", _synth, "write a deterministic synthetic graph (for benchmarks)",
                "Write a synthetic graph typed like the embedded model: N nodes and about 3N edges, in the format "
                "OUT's extension names (.jsonl or .ndjson: JSON Lines; .json; .yaml or .yml). The same N and --seed "
                "always give the same file.")  # fmt: skip
    p.add_argument("path", type=Path, metavar="OUT", help="output .jsonl, .ndjson, .json, .yaml or .yml file")
    p.add_argument("--nodes", type=int, required=True, metavar="N", help="number of nodes")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p = command("token", _token_usage, "create, revoke and list bearer tokens for HTTP callers",
                "Manage the bearer tokens that identify HTTP callers. Only a SHA-256 of each token is kept, in the "
                "token file ([auth] tokens, default ./canon-tokens.json); a running server notices changes on "
                "its next request.")  # fmt: skip
    tokens = p.add_subparsers(title="token commands", metavar="ACTION")
    t = tokens.add_parser("create", help="make a token and print it once",
                          description="Make a token for NAME with ROLE and print it on standard output. It is "
                          "shown only this once: keep it in a secret manager or the client's settings.")  # fmt: skip
    t.add_argument("name", metavar="NAME", help="the principal's name (restricted nodes name it as user:NAME)")
    t.add_argument("--role", required=True, choices=("reader", "writer", "admin"), help="what the token may do")
    t.add_argument("--group", action="append", default=[], metavar="GROUP", dest="groups",
                   help="a group the principal belongs to (group:GROUP in readers); repeatable")  # fmt: skip
    t.add_argument("--expires-in", type=_duration, metavar="DURATION", dest="expires_in",
                   help="refuse the token from this long after now on: a number and d, h or m (90d, 12h); "
                   "default: never")  # fmt: skip
    t.set_defaults(handler=_token_create)
    t = tokens.add_parser("revoke", help="revoke a token now", description="Delete NAME's token. A running "
                          "server refuses it (401) from its next request on.")  # fmt: skip
    t.add_argument("name", metavar="NAME")
    t.set_defaults(handler=_token_revoke)
    t = tokens.add_parser("list", help="list token names, roles and groups (never the tokens)",
                          description="List every token's name, role, groups, creation time and expiry "
                          "(- for none).")  # fmt: skip
    t.set_defaults(handler=_token_list)
    p = command("store", _store_usage, "copy, back up or compact a store",
                "Commands on whole stores. `canon store copy SOURCE TARGET` copies a store file or database into a "
                "new (or empty) one, of either backend, losslessly: the model, nodes, edges, every revision of the "
                "change log and the audit log. `backup` and `compact` are the day-two operations "
                "(docs/operations/deploy.md).")  # fmt: skip
    stores = p.add_subparsers(title="store commands", metavar="ACTION")
    t = stores.add_parser("copy", help="copy SOURCE into the new store TARGET",
                          description="Copy the store SOURCE (a file or a postgresql:// URL) into TARGET, which must "
                          "be new or empty: SQLite to PostgreSQL and back. Revisions, times and authors are kept, "
                          "so TARGET's change feed is SOURCE's.")  # fmt: skip
    t.add_argument("source", type=store_location, metavar="SOURCE")
    t.add_argument("target", type=store_location, metavar="TARGET")
    t.set_defaults(handler=_store_copy)
    t = stores.add_parser("backup", help="copy the store into the new file PATH, consistently, while it serves",
                          description="Copy the store into the new file PATH with SQLite's online backup: one "
                          "consistent state, taken while canon serves. Restore by stopping canon and copying PATH "
                          "over the store file (docs/operations/deploy.md). A PostgreSQL store is backed up with "
                          "pg_dump.")  # fmt: skip
    t.add_argument("path", type=Path, metavar="PATH")
    t.set_defaults(handler=_store_backup)
    t = stores.add_parser("compact", help="remove what [retention] lets go of the audit and change logs",
                          description="Remove audit records older than [retention] audit_days and changes older "
                          "than changes_days outside the newest changes_keep_revisions (the newest revision always "
                          "stays). get_changes from before the oldest revision kept answers `gone`. Options "
                          "override the configuration.")  # fmt: skip
    t.add_argument("--audit-days", type=int, metavar="DAYS", help="drop audit records older than DAYS days")
    t.add_argument("--keep-revisions", type=int, metavar="N", help="keep at least the newest N revisions")
    t.add_argument("--changes-days", type=int, metavar="DAYS", help="drop changes older than DAYS days")
    t.set_defaults(handler=_store_compact)
    p = command("model", _model_usage, "change the model on purpose: diff, apply, log, show",
                "Commands on the model. `canon model diff [OLD] NEW` classifies every change between two model files "
                "(OLD omitted: the store's current model) as compatible, needs-data-check or breaking on each "
                "surface (MCP, REST, GraphQL, llms.txt) and for the write rules every surface enforces, from what "
                "the generators produce for each; a surface nothing changed on reads none. `canon model "
                "apply NEW` shows that plan and applies it to the store in one transaction; `canon model log` lists "
                "the models the store has applied, `canon model show` prints one.")  # fmt: skip
    models = p.add_subparsers(title="model commands", metavar="ACTION")
    t = models.add_parser("diff", help="classify every change from OLD (or the store's model) to NEW",
                          description="Generate every surface's artifacts for both models and list each difference "
                          "with its classification; with the store's model as OLD, also count the stored records "
                          "NEW would refuse (the store is opened read-only).")  # fmt: skip
    t.add_argument("files", nargs="+", type=Path, metavar="[OLD] NEW", help="model files")
    t.add_argument("--json", action="store_true", help="the report as one JSON object")
    t.add_argument("--fail-on", choices=CLASSES[:0:-1], metavar="LEVEL",
                   help="exit 1 if any change is this severe or worse: breaking, needs-data-check or compatible "
                   "(any change at all)")  # fmt: skip
    _progress_option(t)
    t.set_defaults(handler=_model_diff)
    t = models.add_parser("apply", help="apply NEW to the store: show the plan, then change the model",
                          description="Show the plan (`canon model diff` against the store: every surface's changes "
                          "and the stored records NEW would refuse), then apply NEW in one transaction, recorded in "
                          "the change log (a model change, with the principal), the model history and the audit log; "
                          "every server on the store follows. NEW's version must be higher than the store's; a "
                          "breaking change needs a higher major version or --allow-breaking; a stored record NEW "
                          "refuses refuses the change (nothing is changed).")  # fmt: skip
    t.add_argument("file", type=Path, metavar="NEW", help="the model file to apply")
    t.add_argument("--allow-breaking", action="store_true",
                   help="apply a breaking change without a higher major version")  # fmt: skip
    t.add_argument("--yes", action="store_true", help="apply without asking (needed when not on a terminal)")
    t.add_argument("--dry-run", action="store_true", help="show the plan and check it; change nothing")
    t.add_argument("--json", action="store_true", help="the plan and the outcome as one JSON object")
    _progress_option(t)
    _store_option(t)
    t.set_defaults(handler=_model_apply)
    t = models.add_parser("log", help="list the models the store has applied, oldest first",
                          description="One line per model the store has recorded: the revision that recorded it, "
                          "its version, when, by whom, and a summary of the change (its classification per "
                          "surface).")  # fmt: skip
    t.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    _store_option(t)
    t.set_defaults(handler=_model_log)
    t = models.add_parser(
        "show",
        help="print the store's model (now, or at a past revision)",
        description="Print the model document the store holds now, or held at revision REV.",
    )
    t.add_argument("--at", type=int, metavar="REV", help="the model in effect at this revision")
    _store_option(t)
    t.set_defaults(handler=_model_show)
    p = command("audit", _audit, "show the audit log (newest first)",
                "Show the audit log, newest first: one line per call on every surface, with time, principal, "
                "surface, action, target, outcome, revision and duration. Filters combine.")  # fmt: skip
    p.add_argument("--principal", help="only calls by this principal")
    p.add_argument("--target", metavar="TOOL_OR_URI", help="only calls of this tool or on this resource")
    p.add_argument("--outcome", choices=OUTCOMES, help="only calls with this outcome")
    p.add_argument("--surface", help="only calls on this surface (e.g. mcp-http, mcp-stdio)")
    p.add_argument("--since", metavar="TIME", help="only calls at or after this ISO 8601 time")
    p.add_argument("--limit", type=int, default=50, help="at most this many records (default: 50)")
    p.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    return parser


def _progress_option(parser: argparse.ArgumentParser) -> None:
    """`--progress`/`--no-progress` of a long command: its phases' bars on stderr (`core.values.progress`)."""
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show progress bars on stderr (default: when stderr is a terminal)")  # fmt: skip


def _store_option(parser: argparse.ArgumentParser) -> None:
    """`--store` after the command too (`canon model apply NEW --store URL`), as before it."""
    parser.add_argument("--store", type=store_location, default=argparse.SUPPRESS, metavar="PATH|URL",
                        help="store file or postgresql:// URL (overrides the configuration)")  # fmt: skip


def _config(args: argparse.Namespace) -> Config:
    config = load_config(args.config)
    if args.store is not None:
        config = replace(config, store=args.store, origins={**config.origins, "store": "--store"})
    if args.model is not None:
        config = replace(config, model=args.model, origins={**config.origins, "model": "--model"})
    return config


def _print_problems(summary: str, problems: Sequence[Problem]) -> None:
    print(f"canon: {summary}", file=sys.stderr)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)


def _init(args: argparse.Namespace) -> int:
    config = _config(args)
    existed = store_exists(config.store)
    instance = open_instance(config, with_index=False, principal=CLI_PRINCIPAL)
    try:
        stats = instance.store.stats()
    finally:
        instance.close()
    verb = "Opened" if existed else "Created"
    print(f"{verb} {instance.store.location} ({instance.model.name} {instance.model.version}): "
          f"{stats.nodes} nodes, {stats.edges} edges, revision {stats.revision}.")  # fmt: skip
    return 0


def _validate(args: argparse.Namespace) -> int:
    file: Path = args.model_file or _config(args).model or default_model_path()
    from core.values.documents import load_document

    document, problems = load_document(file)
    problems = problems or check_model(document, source=str(file))
    if problems:
        _print_problems(f"{file}: {len(problems)} problem(s).", problems)
        return EXIT_PROBLEMS
    model = load_model(file)
    print(f"{file}: ok ({model.name} {model.version}: {len(model.node_types)} node types, "
          f"{len(model.edge_types)} edge types).")  # fmt: skip
    return 0


def _import(args: argparse.Namespace) -> int:
    instance = open_instance(_config(args), with_index=False, principal=CLI_PRINCIPAL)
    bar = ProgressBar(enabled=args.progress)
    try:
        report = import_path(instance.store, args.path, principal=CLI_PRINCIPAL, dry_run=args.dry_run, progress=bar)
    finally:
        bar.close()
        instance.close()
    if report.revision is None:
        print(f"{args.path}: ok, {report.nodes} nodes and {report.edges} edges would be imported (dry run).")
    else:
        print(f"Imported {report.nodes} nodes and {report.edges} edges from {report.files} file(s): "
              f"{report.changed} changed, now at revision {report.revision}.")  # fmt: skip
    return 0


def _read_only_store(args: argparse.Namespace) -> Store:
    """The configured store, opened read-only on the model recorded in it: a read-only command changes no store
    whatever model file it is given, and a store that does not exist is an error, not a new one."""
    return open_existing_store(_config(args).store, read_only=True)


def _export(args: argparse.Namespace) -> int:
    store = _read_only_store(args)
    try:
        if args.path == "-":
            nodes, edges = export_graph(store, None, format=args.format or "json", out=sys.stdout)
        else:
            nodes, edges = export_graph(store, Path(args.path), format=args.format)
    finally:
        store.close()
    if args.path != "-":
        print(f"Exported {nodes} nodes and {edges} edges to {args.path}.")
    return 0


def _serve(args: argparse.Namespace) -> int:
    import re

    from core.ops.logs import configure_logging

    if args.tool_prefix and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,31}", args.tool_prefix):
        raise ConfigError(
            "--tool-prefix must be letters, digits, _ or -, starting with a letter.", source="--tool-prefix"
        )
    sys.setswitchinterval(0.0001)  # a cheap read waits 0.1 ms per GIL hand-off behind a walk, not 5 (ADR 0017)
    config = _config(args)
    config = replace(config, host=args.host or config.host, port=config.port if args.port is None else args.port)
    configure_logging(args.log_level.upper(), config)
    from core.mcp.options import ServeOptions

    options = ServeOptions(profile=args.profile, prefix=args.tool_prefix)
    if not 1 <= args.workers <= 64:
        raise ConfigError("--workers must be between 1 and 64.", source="--workers")
    if args.workers > 1 and args.stdio:
        raise ConfigError("--workers applies to HTTP; stdio serves one client in one process.", source="--workers")
    _check_served_model(config, follow=args.follow_model or config.follow_model)
    instance = open_instance(config, principal=CLI_PRINCIPAL)
    signal.signal(signal.SIGTERM, _terminate)  # stop like Ctrl-C does: the audit log is flushed, the store closed
    if args.workers > 1:  # the store exists and is seeded now; each worker opens its own
        from core.http.serve import serve_workers, served

        what = served(instance)
        instance.close()
        serve_workers(config, _surfaces(options), args.workers, what)
        return 0
    try:
        if args.stdio:
            from core.mcp.stdio import serve_stdio

            serve_stdio(instance, options)
        else:
            from core.http.serve import serve_http

            serve_http(instance, _surfaces(options))
    finally:
        instance.close()
    return 0


def _surfaces(options: ServeOptions) -> list[Surface]:
    """Every installed surface, in `discover`'s order, MCP presenting the registry as `options` say."""
    from core.mcp.plugin import McpPlugin
    from core.seam.surfaces import discover

    return [McpPlugin(options) if isinstance(s, McpPlugin) else s for s in discover()]


def _check_served_model(config: Config, *, follow: bool) -> None:
    """Refuse to serve a model file that differs from the store's, unless following it (`--follow-model`): then
    apply it if the change breaks no surface and refuses no stored record (`canon model diff`)."""
    if not store_exists(config.store) or (config.model is None and not follow):
        return  # a new store, or no model configured: the store serves the model it records (`open_instance`)
    wanted = load_model(config.model)
    store = open_existing_store(config.store, read_only=True)
    try:
        stored, superseded = store.model, store.superseded(wanted)
    finally:
        store.close()
    if stored.digest == wanted.digest or superseded:  # an older model of the store's: it serves its own, warning
        return
    change = f"The model {wanted.source} ({wanted.name} {wanted.version}) differs from the store's " \
             f"({stored.name} {stored.version})"  # fmt: skip
    if not follow:
        raise ConfigError(f"{model_differs(store.location, stored.document, wanted)} While developing, serve with "
                          "--follow-model to apply compatible changes of the file.", source="model")  # fmt: skip
    from core.seam.model_apply import Planner

    store = open_existing_store(config.store)
    planner = Planner(store)
    try:
        plan = planner.plan(wanted)
        refused = plan.diff.data.refused if plan.diff.data else 0
        if plan.diff.classification() == BREAKING or refused:
            raise ConfigError(f"{change} and --follow-model adopts only compatible changes: this one is "
                              f"{plan.diff.classification()} ({refused} stored record(s) refused); see 'canon model "
                              f"diff {wanted.source}'.", source="--follow-model")  # fmt: skip
        planner.apply(plan, principal=CLI_PRINCIPAL)
    finally:
        store.close()


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM handler: unwind (running every `finally`) and exit with the conventional status 128 + 15.

    uvicorn handles SIGTERM itself while it serves, shuts down gracefully, then re-raises the signal with the
    handler it found installed: this one, so the process still unwinds instead of dying mid-cleanup.
    """
    raise SystemExit(128 + signum)


def _stats(args: argparse.Namespace) -> int:
    store = _read_only_store(args)
    try:
        s = store.stats()
    finally:
        store.close()
    print(json.dumps({
        "store": store.location, "model": {"name": store.model.name, "version": store.model.version},
        "revision": s.revision, "nodes": s.nodes, "edges": s.edges, "changes": s.changes,
        "size_bytes": s.size_bytes, "nodes_by_type": s.nodes_by_type, "edges_by_type": s.edges_by_type,
    }, indent=2))  # fmt: skip
    return 0


def _generate(args: argparse.Namespace) -> int:
    from core.app.artifacts import check, generate, write
    from core.dispatch.guides import guides
    from core.dispatch.registry import build_registry
    from core.lang.model import load_model

    model = _config(args).model
    files = generate(model)
    guide_folder = args.out.parent / "surfaces"  # the surface guides' tool tables (docs/surfaces)
    pages = guides(build_registry(load_model(model)), guide_folder) if guide_folder.is_dir() else {}
    if args.check:
        diffs = check(files, args.out) + check(pages, guide_folder)
        for diff in diffs:
            sys.stdout.write(diff)
        if diffs:
            print(f"canon: {len(diffs)} of {len(files) + len(pages)} generated files in {args.out} and "
                  f"{guide_folder} are out of date; run 'canon generate' and commit the result",
                  file=sys.stderr)  # fmt: skip
            return EXIT_PROBLEMS
        print(f"canon: the {len(files)} reference artifacts in {args.out} and the {len(pages)} guide tables are "
              "current", file=sys.stderr)  # fmt: skip
        return 0
    changed = write(files, args.out) + (write(pages, guide_folder) if pages else [])
    print(f"canon: wrote {len(files)} reference artifacts to {args.out} and {len(pages)} guide tables to "
          f"{guide_folder} ({len(changed)} changed: {', '.join(p.name for p in changed) or 'none'})",
          file=sys.stderr)  # fmt: skip
    return 0


def _show_config(args: argparse.Namespace) -> int:
    config = _config(args)
    settings, origins = effective_settings(config)
    print(json.dumps({"file": str(config.source) if config.source else None, "settings": settings, "from": origins},
                     indent=2))  # fmt: skip
    return 0


def _token_usage(args: argparse.Namespace) -> int:
    print("canon token: choose an action: create, revoke or list (see canon token --help).", file=sys.stderr)
    return EXIT_USAGE


def _token_create(args: argparse.Namespace) -> int:
    tokens = token_file(_config(args))
    token = tokens.create(args.name, args.role, args.groups, args.expires_in)
    print(token)
    article = "an" if args.role[0] in "aeiou" else "a"
    print(f"canon: created {article} {args.role} token for {args.name} in {tokens.path}; it is shown only this once.",
          file=sys.stderr)  # fmt: skip
    return 0


def _token_revoke(args: argparse.Namespace) -> int:
    tokens = token_file(_config(args))
    try:
        tokens.revoke(args.name)
    except NotFoundError:
        print(f"canon: there is no token named {args.name!r} in {tokens.path}.", file=sys.stderr)
        return EXIT_PROBLEMS
    print(f"canon: revoked the token of {args.name}.", file=sys.stderr)
    return 0


def _token_list(args: argparse.Namespace) -> int:
    for entry in token_file(_config(args)).entries():
        groups = ",".join(entry.groups) or "-"
        print(f"{entry.name}\t{entry.role}\t{groups}\t{entry.created_at}\t{entry.expires_at or '-'}")
    return 0


_UNITS = {"d": timedelta(days=1), "h": timedelta(hours=1), "m": timedelta(minutes=1)}


def _duration(text: str) -> timedelta:
    """`--expires-in`: a positive whole number and a unit, d(ays), h(ours) or m(inutes)."""
    number, unit = text[:-1], text[-1:]
    if unit not in _UNITS or not (number.isascii() and number.isdigit()) or int(number) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90d, 12h or 30m")
    return int(number) * _UNITS[unit]


def _store_usage(args: argparse.Namespace) -> int:
    print("canon store: choose an action: copy, backup or compact (see canon store --help).", file=sys.stderr)
    return EXIT_USAGE


def _store_copy(args: argparse.Namespace) -> int:
    stats = copy_store(args.source, args.target)
    print(f"Copied {stats.nodes} nodes, {stats.edges} edges and {stats.changes} changes (revision {stats.revision}) "
          "with the audit log.")  # fmt: skip
    return 0


def _store_backup(args: argparse.Namespace) -> int:
    store = open_existing_store(_config(args).store)
    try:
        store.backup(args.path)
        revision = store.revision()
    finally:
        store.close()
    print(f"Backed up {store.location} at revision {revision} to {args.path}.")
    return 0


def _store_compact(args: argparse.Namespace) -> int:
    config = _config(args)
    given = {"audit_days": args.audit_days, "changes_keep_revisions": args.keep_revisions,
             "changes_days": args.changes_days}  # fmt: skip
    for name, value in given.items():
        if value is not None and value < 1:
            print(f"canon store compact: --{name.replace('_', '-')} must be 1 or more.", file=sys.stderr)
            return EXIT_USAGE
    retention = Retention(**{name: value if value is not None else getattr(config, name)
                             for name, value in given.items()})  # fmt: skip
    store = open_existing_store(config.store)
    try:
        done = store.compact(retention)
    finally:
        store.close()
    print(f"Removed {done.changes_removed} changes and {done.audit_removed} audit records; the change log starts "
          f"at revision {done.oldest}.")  # fmt: skip
    return 0


def _model_usage(args: argparse.Namespace) -> int:
    print("canon model: choose an action: diff, apply, log or show (see canon model --help).", file=sys.stderr)
    return EXIT_USAGE


def _model_diff(args: argparse.Namespace) -> int:
    from core.seam.model_diff import diff_models  # of two registries' artifacts: no store or instance opened

    if len(args.files) > 2:
        raise ConfigError("canon model diff takes at most two model files: [OLD] NEW.", source="model diff")
    new = load_model(args.files[-1])
    bar = ProgressBar(enabled=args.progress)
    try:
        if len(args.files) == 2:
            report = diff_models(load_model(args.files[0]), new, progress=bar)
        else:
            store = _read_only_store(args)
            try:
                report = diff_models(store.model, new, store, progress=bar)
            finally:
                store.close()
    finally:
        bar.close()
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        _print_model_diff(report.as_dict())
    failed = args.fail_on is not None and CLASSES.index(report.classification()) >= CLASSES.index(args.fail_on)
    return EXIT_PROBLEMS if failed else 0


def _model_apply(args: argparse.Namespace) -> int:
    from core.seam.model_apply import Planner

    model = load_model(args.file)
    store = open_existing_store(_config(args).store)
    planner = Planner(store)
    try:
        bar = ProgressBar(enabled=args.progress)
        try:
            plan = planner.plan(model, progress=bar)
        finally:
            bar.close()
        report: dict[str, Any] = {"plan": plan.as_dict(), "applied": False, "revision": store.revision()}
        if not args.json:
            _print_model_diff(plan.diff.as_dict())
        planner.check(plan, allow_breaking=args.allow_breaking)  # refused before anyone is asked
        if not (plan.unchanged or args.dry_run):
            if not (args.yes or _confirmed(f"Apply {plan.diff.new} to {store.location}?")):
                raise ConfigError("Not applied: confirm on a terminal, or pass --yes.", source="model apply")
            started = time.monotonic()
            records = plan.diff.data.checked if plan.diff.data is not None else 0
            bar = ProgressBar(enabled=args.progress)
            try:  # the store checks every record again in its transaction: shown begun, then done (no rate yet)
                bar("applying", 0, records)
                report["revision"] = planner.apply(plan, principal=CLI_PRINCIPAL, allow_breaking=args.allow_breaking)
                bar("applying", records, records)
            finally:
                bar.close()
            report["applied"] = True
            store.append_audit([AuditRecord(utc_now(), CLI_PRINCIPAL, "cli", "model/apply", "apply_model",
                                            model.digest, "ok", report["revision"],
                                            (time.monotonic() - started) * 1000)])  # fmt: skip
    finally:
        store.close()
    if args.json:
        print(json.dumps(report, indent=2))
    elif plan.unchanged:
        print(f"The store's model is {plan.diff.new} already; nothing to apply.")
    elif report["applied"]:
        print(f"Applied {plan.diff.new} to {store.location} at revision {report['revision']}.")
    else:
        print("The plan can be applied (dry run; nothing was changed).")
    return 0


def _confirmed(question: str) -> bool:
    """Whether the person at the terminal answers yes (never, when standard input is not a terminal)."""
    if not sys.stdin.isatty():
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def _model_log(args: argparse.Namespace) -> int:
    store = _read_only_store(args)
    try:
        history = store.model_history()
    finally:
        store.close()
    for entry in history:
        if args.json:
            print(json.dumps(entry.as_dict()))
            continue
        summary = entry.summary or {}
        change = summary.get("classification", "first model" if entry is history[0] else "")
        print(f"r{entry.revision:<8} {entry.version:<10} {entry.at}  {entry.principal:<16} {change}")
    return 0


def _model_show(args: argparse.Namespace) -> int:
    store = _read_only_store(args)
    try:
        model = store.stored_model() if args.at is None else store.model_at(args.at)
    finally:
        store.close()
    print(json.dumps(model.document, indent=2, ensure_ascii=False))
    return 0


def _print_model_diff(report: dict[str, Any]) -> None:
    print(f"{report['old']} -> {report['new']}: {report['classification']}")
    for surface, classification in report["surfaces"].items():
        print(f"  {surface:<8} {classification}")
    for f in report["findings"]:
        if f["classification"] not in (NONE, COMPATIBLE):
            print(f"  {f['classification']:<16} {f['surface']:<8} {f['where']}: {f['change']}")
    compatible = sum(f["classification"] == COMPATIBLE for f in report["findings"])
    print(f"  ({compatible} compatible change(s) not listed; --json lists all)")
    data = report["data"]
    if data is not None:
        print(f"data: {data['refused']} of {data['checked']} stored record(s) (nodes and edges) would be refused")
        for s in data["sample"]:
            print(f"  {s['id']}{s['pointer']}: {s['message']}")
        for m in data["moved"]:
            owner = f"{m['type']}." if m["type"] else ""
            print(f"  {m['kind']} {owner}{m['from']} -> {owner}{m['to']}: {m['records']} stored record(s) move")


def _audit(args: argparse.Namespace) -> int:
    from core.tools.audit import utc
    from core.values.audit import AuditQuery

    if args.limit < 1:
        raise ConfigError("--limit must be at least 1.", source="--limit")
    try:
        since = utc(args.since)
    except ValueError:
        raise ConfigError(f"--since {args.since!r} is not an ISO 8601 time.", source="--since") from None
    store = _read_only_store(args)
    try:
        query = AuditQuery(args.principal, args.target, args.outcome, args.surface, since)
        records, total = store.audit_records(query, before=None, limit=args.limit)
    finally:
        store.close()
    for r in records:
        if args.json:
            print(json.dumps(r))
        else:
            print(f"{r['at']}  {r['principal']:<16} {r['surface']:<10} {r['action']:<20} {r['target'][:48]:<48} "
                  f"{r['outcome']:<9} r{r['revision']:<7} {r['duration_ms']:.1f} ms")  # fmt: skip
    if not args.json:
        print(f"canon: {len(records)} of {total} matching record(s).", file=sys.stderr)
    return 0


def _synth(args: argparse.Namespace) -> int:
    from core.app.synthetic import write_synthetic

    if args.nodes < 1:
        raise ConfigError("--nodes must be at least 1.", source="--nodes")
    nodes, edges = write_synthetic(args.path, args.nodes, args.seed)
    print(f"Wrote {nodes} nodes and {edges} edges to {args.path}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
