"""The pages surface: HTML pages for people under `/browse/`, server-rendered, readable without JavaScript.

    /browse/                         the node types with counts, the search box, recent changes
    /browse/types/<Type>             a type's nodes as a table: facets, filters, text search, cursor pages
    /browse/types/<Type>.csv|.json   the same rows, same filters, as CSV or as find_nodes' answer
    /browse/nodes/<id>               a node: properties, edges both ways under the model's names, history
    /browse/nodes/<id>?at=<rev>      the node as it was at a past revision
    /browse/nodes/<id>/diff?from=&to=   what changed on it between two revisions (diff_revisions)
    /browse/nodes/<id>/edges.csv|.json  its edges
    /browse/nodes/<id>/edit          a form for its properties (GET), written through patch_node (POST)
    /browse/nodes/<id>/edges         POST: add an edge (upsert_edge, expected_revision 0) or remove one (delete_edge)
    /browse/nodes/<id>/edge?type=&source=&target=   a form for an edge's properties, written through upsert_edge
    /browse/nodes/<id>/edge/new?name=   a form adding an edge whose type has properties (upsert_edge expected new)
    /browse/types/<Type>/new         a form for a new node (GET), written through upsert_node expected new (POST)
    /browse/search?q=&type=          ranked search, facets by type (.csv, .json)
    /browse/changes?since=           the change log (.csv, .json)
    /browse/model                    every type, property, constraint and edge type of the model
    /browse/proposals[/<id>]         proposals to review, each with its diff, discussion and review form
                                     (generators.pages.proposals)
    /browse/-/pages.css              the one stylesheet (shipped in the wheel)

Every read goes through `host.call_tool` as the request's caller (`generators.pages.reads`), so a page shows
what REST, GraphQL and MCP show that caller, and each read is audited under the surface name `pages`. What each
page shows is `generators.pages.views`; the templates and downloads are `generators.pages.render`.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route, Router

from core.dispatch.registry import Registry
from core.seam.surfaces import ASGIApp, SurfaceHost
from core.values.errors import CanonError, ForbiddenError, NotFoundError, Problem, ValidationError
from core.web import PAGE_ANSWER, PROBLEM_MEDIA, STATUS, problem_body
from generators.pages.creating import Creating
from generators.pages.editing import CSRF_COOKIE, CSRF_FIELD, csrf_matches, new_token
from generators.pages.proposals import routes as proposal_routes
from generators.pages.reads import Reader
from generators.pages.render import PREFIX, csv_text, environment, json_text
from generators.pages.views import View, Views

__all__ = ["PagesSurface", "surface"]

log = logging.getLogger("canon.pages")
HTML = "text/html; charset=utf-8"
FORMATS = {"csv": "text/csv; charset=utf-8", "json": "application/json"}
HEADERS = {
    "cache-control": "private, no-store",  # a page is the caller's own: never kept by a shared cache
    "x-content-type-options": "nosniff",
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",  # no script at all: a page that only links and submits forms
    "referrer-policy": "same-origin",
}
Endpoint = Callable[[Request], Awaitable[Response]]
Shower = Callable[[Reader, str], View]  # a form's page, given the request's reader and the form's CSRF token
Submitter = Callable[[Reader, list[tuple[str, str]], str], Any]  # a posted form's write: a View (shown again) or done
CSRF_REFUSED = ("This form was not sent from this server's own edit page (its anti-forgery token is missing or "
                "does not match); open the edit page again and resubmit.")  # fmt: skip


def _stylesheet() -> bytes:
    return resources.files("generators.pages").joinpath("static/pages.css").read_bytes()


class Pages:
    """The routes of one model's pages."""

    def __init__(self, host: SurfaceHost, registry: Registry) -> None:
        self.host = host
        self.views = Views(registry.model)
        self.creating = Creating(self.views)
        self.env = environment(host.settings.base_url)
        self.css = _stylesheet()

    def reader(self, request: Request) -> Reader:
        return Reader(self.host, self.host.principal_of(request), time.monotonic())

    def render(self, view: View, status: int = 200) -> Response:
        template = self.env.get_template(view.template)
        body = template.render(title=view.title, principal=None, **view.context)
        return Response(body, status, headers=HEADERS, media_type=HTML)

    def error_page(self, request: Request, error: CanonError, suffix: str | None) -> Response:
        """A refused read as a page naming what went wrong (or, for a download, the problem document)."""
        status = STATUS.get(error.code, 500)
        problems: tuple[Problem, ...] = getattr(error, "problems", ())
        if suffix is not None:
            errors = [{"pointer": p.pointer, "message": p.message} for p in problems]
            body = problem_body(status, error.code, str(error), request.url.path, errors)
            return Response(body, status, headers=HEADERS, media_type=PROBLEM_MEDIA)
        view = View("error.html.j2", {"error": str(error), "code": error.code, "status": status,
                                      "problems": problems}, title="Error")  # fmt: skip
        request.scope[PAGE_ANSWER] = True  # a page for a person: the host's problem layer passes it as it is
        return self.render(view, status)

    async def answer(self, request: Request, build: Callable[[Reader], View], suffix: str | None = None) -> Response:
        reader = self.reader(request)

        def work() -> Response:
            try:
                view = build(reader)
            except CanonError as error:
                return self.error_page(request, error, suffix)
            if suffix is None:
                return self.render(view)
            return self.download(view, suffix)

        return await anyio.to_thread.run_sync(work)

    @staticmethod
    def download(view: View, suffix: str) -> Response:
        assert view.download is not None
        got = view.download
        text = csv_text(got.columns, got.rows) if suffix == "csv" else json_text(got.answer)
        headers = {**HEADERS, "content-disposition": f'attachment; filename="{_file_name(got.name)}.{suffix}"'}
        return Response(text, 200, headers=headers, media_type=FORMATS[suffix])

    # -- the routes ----------------------------------------------------------------------------------------------
    def routes(self) -> list[Route]:
        get = ["GET", "HEAD"]
        return [
            Route(PREFIX, self.to_home, methods=get),
            Route(PREFIX + "/", _guarded(self.home), methods=get),
            Route(PREFIX + "/-/pages.css", self.stylesheet, methods=get),
            Route(PREFIX + "/model", _guarded(self.model), methods=get),
            Route(PREFIX + "/types/{name}", _guarded(self.type_page), methods=get),
            Route(PREFIX + "/types/{name}/new", _guarded(self.new_node), methods=[*get, "POST"]),
            Route(PREFIX + "/nodes/{id}", _guarded(self.node), methods=get),
            Route(PREFIX + "/nodes/{id}/diff", _guarded(self.diff), methods=get),
            Route(PREFIX + "/nodes/{id}/edit", _guarded(self.edit), methods=[*get, "POST"]),
            Route(PREFIX + "/nodes/{id}/edges", _guarded(self.edges_edit), methods=["POST"]),
            Route(PREFIX + "/nodes/{id}/edge", _guarded(self.edge_edit), methods=[*get, "POST"]),
            Route(PREFIX + "/nodes/{id}/edge/new", _guarded(self.edge_new), methods=[*get, "POST"]),
            Route(PREFIX + "/nodes/{id}/edges.{suffix}", _guarded(self.edges), methods=get),
            *[Route(PREFIX + f"/{name}{dot}", _guarded(functools.partial(endpoint, suffix=suffix)), methods=get)
              for name, endpoint in (("search", self.search), ("changes", self.changes))
              for dot, suffix in (("", None), (".csv", "csv"), (".json", "json"))],
            *proposal_routes(self, _guarded),  # where people review proposals (generators.pages.proposals)
        ]  # fmt: skip

    async def to_home(self, request: Request) -> Response:
        return RedirectResponse(self.host.settings.base_url + PREFIX + "/", 308)

    async def stylesheet(self, request: Request) -> Response:
        return Response(self.css, media_type="text/css; charset=utf-8",
                        headers={"cache-control": "public, max-age=3600"})  # fmt: skip

    async def home(self, request: Request) -> Response:
        revision = self.host.revision()
        return await self.answer(request, lambda reader: self.views.home(reader, revision))

    async def model(self, request: Request) -> Response:
        return await self.answer(request, lambda reader: self.views.model_page())

    async def type_page(self, request: Request) -> Response:
        name, suffix = _split_suffix(request.path_params["name"])
        query = request.query_params.multi_items()
        facets = suffix is None  # a download carries the rows only

        return await self.answer(request, lambda reader: self.views.type_page(reader, name, query, facets=facets),
                                 suffix)  # fmt: skip

    async def node(self, request: Request) -> Response:
        id = request.path_params["id"]
        at = request.query_params.get("at")
        return await self.answer(request, lambda reader: self.views.node_page(reader, id, _at(at)))

    async def edges(self, request: Request) -> Response:
        suffix = request.path_params["suffix"]
        if suffix not in FORMATS:
            return self.error_page(request, _no_page(request.url.path), None)
        id = request.path_params["id"]
        return await self.answer(request, lambda reader: self.views.node_page(reader, id, None), suffix)

    async def diff(self, request: Request) -> Response:
        id = request.path_params["id"]
        query = dict(request.query_params)
        return await self.answer(request, lambda reader: self.views.diff(reader, id, query))

    async def edit(self, request: Request) -> Response:
        """The edit form (GET), or a submitted one written through patch_node (POST, its CSRF token checked)."""
        id = request.path_params["id"]

        def saved(_: object) -> str:
            return PREFIX + "/nodes/" + quote(id, safe="")

        return await self.form(request, lambda reader, token: self.views.edit_form(reader, id, token),
                               lambda reader, form, token: self.views.save(reader, id, form, token), saved)  # fmt: skip

    async def edges_edit(self, request: Request) -> Response:
        """Add or remove one of a node's edges (POST from its edit page): upsert_edge or delete_edge."""
        id = request.path_params["id"]

        def changed(_: object) -> str:
            return PREFIX + "/nodes/" + quote(id, safe="") + "/edit#edges-heading"

        return await self.submit_form(request, lambda reader, form, token: self.views.change_edge(reader, id, form),
                                      changed)  # fmt: skip

    async def new_node(self, request: Request) -> Response:
        """A type's "New" form (GET), or a submitted one written through upsert_node expected new (POST)."""
        name = request.path_params["name"]

        def created(answer: Mapping[str, Any]) -> str:
            return PREFIX + "/nodes/" + quote(str(answer["node"]["id"]), safe="")

        def show(reader: Reader, token: str) -> View:
            return self.creating.new_form(self.views.node_type(name), token)

        def submit(reader: Reader, form: list[tuple[str, str]], token: str) -> Mapping[str, Any] | View:
            return self.creating.create(reader, name, form, token)

        return await self.form(request, show, submit, created)

    async def edge_edit(self, request: Request) -> Response:
        """An edge's properties form (GET), or a submitted one written through upsert_edge (POST)."""
        id = request.path_params["id"]
        ref = dict(request.query_params)

        def saved(_: object) -> str:
            return PREFIX + "/nodes/" + quote(id, safe="") + "/edit#edges-heading"

        return await self.form(request, lambda reader, token: self.creating.edge_form(reader, id, ref, token),
                               lambda reader, form, token: self.creating.save_edge(reader, id, form, token),
                               saved)  # fmt: skip

    async def edge_new(self, request: Request) -> Response:
        """The form adding an edge with properties (GET, `?name=` one of the node's edge names), or a submitted
        one written through upsert_edge expected new (POST)."""
        id = request.path_params["id"]
        name = request.query_params.get("name", "")

        def added(_: object) -> str:
            return PREFIX + "/nodes/" + quote(id, safe="") + "/edit#edges-heading"

        return await self.form(request, lambda reader, token: self.creating.new_edge_form(reader, id, name, token),
                               lambda reader, form, token: self.creating.add_edge(reader, id, form, token),
                               added)  # fmt: skip

    # -- forms: every page that writes, its CSRF token checked before any tool runs ----------------------------
    async def form(self, request: Request, show: Shower, submit: Submitter, done: Callable[[Any], str]) -> Response:
        """A form page at one path: `show` it (GET, `show_form`) or `submit` what was POSTed (`submit_form`)."""
        if request.method != "POST":
            return await self.show_form(request, show)
        return await self.submit_form(request, submit, done)

    async def show_form(self, request: Request, show: Shower) -> Response:
        """A page holding a form: `show(reader, token)` with the form's CSRF token, its cookie set when the browser
        has none."""
        cookie = request.cookies.get(CSRF_COOKIE)
        token = cookie or new_token()
        response = await self.answer(request, lambda reader: show(reader, token))
        return self._with_token(request, response, token) if cookie is None else response

    async def submit_form(self, request: Request, submit: Submitter, done: Callable[[Any], str]) -> Response:
        """A POSTed form: refused as a page before any tool runs when it is not a form or its token is not its
        cookie's; else `submit(reader, fields, token)`: a View is the form again (409 for a conflict, else 400), a
        write tool's answer holding a `proposal` (the write waits for review, nothing written) is redirected (303)
        to that proposal's page, and anything else is what was written, redirected to `done(it)`, a path under the
        base URL."""
        cookie = request.cookies.get(CSRF_COOKIE)
        form = await self._posted(request, cookie)
        if isinstance(form, Response):
            return form
        reader = self.reader(request)
        token = cookie or ""  # the check passed: the cookie is there and the form's token is its

        def work() -> Response:
            try:
                again = submit(reader, form, token)
            except CanonError as error:
                return self.error_page(request, error, None)
            made = again.get("proposal") if isinstance(again, Mapping) else None  # pyright: ignore[reportUnknownMemberType]
            if isinstance(made, Mapping):  # the write waits for review: nothing was written, a proposal was made
                proposal = quote(str(made["id"]), safe="")  # pyright: ignore[reportUnknownArgumentType]
                return RedirectResponse(self.host.settings.base_url + PREFIX + "/proposals/" + proposal, 303)
            if not isinstance(again, View):
                return RedirectResponse(self.host.settings.base_url + done(again), 303)
            request.scope[PAGE_ANSWER] = True
            return self.render(again, 409 if again.context.get("conflict") or again.context.get("exists") else 400)

        return await anyio.to_thread.run_sync(work)

    async def _posted(self, request: Request, cookie: str | None) -> list[tuple[str, str]] | Response:
        """A POSTed form's fields, or the page refusing it: a body that is not a form, or (before any tool
        runs) a token that is not the cookie's."""
        try:
            form = parse_qsl((await request.body()).decode("utf-8"), keep_blank_values=True, max_num_fields=500,
                             strict_parsing=False)  # fmt: skip
        except (UnicodeDecodeError, ValueError):
            problem = Problem("/form", "an application/x-www-form-urlencoded body in UTF-8, at most 500 fields")
            return self.error_page(request, ValidationError("The form could not be read.", [problem]), None)
        if not csrf_matches(cookie, dict(form).get(CSRF_FIELD)):
            return self.error_page(request, ForbiddenError("form", "csrf", CSRF_REFUSED), None)
        return form

    def _with_token(self, request: Request, response: Response, token: str) -> Response:
        """Set the form's CSRF cookie: the pages' path only, never sent by another site's request, unreadable by
        script, and Secure when the pages are reached over TLS."""
        path = urlsplit(self.host.settings.base_url).path + PREFIX + "/"
        secure = request.url.scheme == "https" or self.host.settings.base_url.startswith("https:")
        response.set_cookie(CSRF_COOKIE, token, path=path, httponly=True, samesite="strict", secure=secure)
        return response

    async def search(self, request: Request, suffix: str | None) -> Response:
        query = dict(request.query_params)
        types = request.query_params.getlist("type")
        return await self.answer(request, lambda reader: self.views.search(reader, query, types), suffix)

    async def changes(self, request: Request, suffix: str | None) -> Response:
        query = dict(request.query_params)
        return await self.answer(request, lambda reader: self.views.changes(reader, query), suffix)


def _guarded(endpoint: Endpoint) -> Endpoint:
    """The surface's outer boundary: anything unexpected is logged and a 500 without a traceback."""

    @functools.wraps(endpoint)
    async def guarded(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Exception:
            log.exception("pages %s %s failed", request.method, request.url.path)
            return Response("This page could not be shown; the error is in the server's log.", 500,
                            media_type="text/plain; charset=utf-8")  # fmt: skip

    return guarded


def _split_suffix(name: str) -> tuple[str, str | None]:
    """`Service.csv` -> (`Service`, `csv`); a type name holds no dot, so any other suffix stays in the name (and
    is then no type)."""
    stem, dot, suffix = name.rpartition(".")
    return (stem, suffix) if dot and suffix in FORMATS else (name, None)


def _at(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19):
        raise ValidationError("at must be a revision.", [Problem("/query/at", "a whole number, 0 or more")])
    return int(raw)


def _no_page(path: str) -> CanonError:
    return NotFoundError("page", path)


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:100] or "download"


@dataclass
class PagesSurface:
    """The pages surface: HTML for people, and CSV and JSON downloads of its lists."""

    name: str = "pages"
    paths: tuple[str, ...] = (PREFIX + "/",)
    home: str = PREFIX + "/"  # where a person starts: the landing page links it (`core.seam.surfaces.home_of`)

    def app(self, host: SurfaceHost, registry: Registry) -> ASGIApp:
        return Router(routes=Pages(host, registry).routes(), redirect_slashes=False)

    def artifacts(self, host: SurfaceHost) -> Mapping[str, str]:
        return {}  # the pages are the data, read per caller: nothing to generate ahead


surface = PagesSurface()
"""The pages surface (`generators.pages.app`)."""
