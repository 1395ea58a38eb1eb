"""The llms.txt surface: `/llms.txt`, `/llms-full.txt` and a Markdown page per tool, node type, node and resource.

Everything here is rendered for the anonymous principal, whoever asks: a crawler has no token, and a page that
showed more to a token holder could be cached and served to someone else. So only public nodes appear, and
every read goes through the one dispatch path as `ANONYMOUS` (audited under this surface's name).

URL layout (root-relative, so the files are the same wherever canon is served; with `[server] public_url` or
`root_path` set, every link starts with that instead, `SurfaceSettings.base_url`):

    /llms.txt                      the llmstxt.org index: H1, summary, details, sections of links, Optional
    /llms-full.txt                 one H1, then every page below inlined, headings one level down
    /tools/<name>.md               a tool: schemas, and how to call it over MCP, REST and GraphQL
    /types/<Name>.md               a node type: properties, edges, JSON Schema, its public nodes (bounded)
    /nodes/<Type>/<id>.md          a public node and its public neighbours, grouped by edge type
    /resources/<name>.md           a resource or template: URI, how to read it, its content (bounded)
    /prompts/<name>.md             a prompt: its arguments and how to get it over MCP

Pages are rendered on first request and kept until the store's revision changes, so repeated crawler hits
cost a dictionary lookup; each answer carries an ETag (a digest of its bytes) and honours If-None-Match.

This module is the serving side: the ASGI app (GET and HEAD, ETag/304, 404/405 as problem+json) and the `surface`
object with its bounds. What each page shows and how its data is gathered is `generators.llms.pages`; the jinja2
environment and the text helpers are `generators.llms.markdown`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from core.dispatch.registry import Registry
from core.lang.schema_diff import Finding
from core.seam.surfaces import ASGIApp, SurfaceHost
from core.web import none_match, send_problem
from generators.llms.compare import compare
from generators.llms.pages import Site, share

__all__ = ["LlmsSurface", "share", "surface"]

log = logging.getLogger("canon.llms")
MARKDOWN = "text/markdown; charset=utf-8"
CACHE_CONTROL = "public, max-age=60"
NOT_FOUND = "There is no public page at this address; start at /llms.txt."


# -- HTTP ------------------------------------------------------------------------------------------------------------
def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _header(scope: Mapping[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def make_app(site: Site) -> ASGIApp:
    """GET and HEAD only; a page is 200 with ETag and Cache-Control, 304 when the ETag matches, else 404."""

    async def app(scope: Any, receive: Callable[[], Any], send: Callable[[Any], Any]) -> None:
        if scope["type"] != "http":
            return
        method = scope["method"]
        if method not in ("GET", "HEAD"):
            await send_problem(send, scope, 405, "method_not_allowed", "Only GET and HEAD are served here.",
                               headers=[(b"allow", b"GET, HEAD")])  # fmt: skip
            return
        try:
            body = await anyio.to_thread.run_sync(site.page, scope["path"])
        except Exception:  # the surface's outermost boundary: log, and answer without a traceback
            log.exception("rendering %s failed", scope["path"])
            await send_problem(send, scope, 500, "internal", "This page could not be rendered; see the server log.")
            return
        if body is None:
            await send_problem(send, scope, 404, "not_found", NOT_FOUND)
            return
        etag = _etag(body)
        headers = [(b"etag", etag.encode()), (b"cache-control", CACHE_CONTROL.encode())]
        if none_match(_header(scope, b"if-none-match"), etag):
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        await _answer(send, 200, body, headers, method)

    return app


async def _answer(send: Callable[[Any], Any], status: int, body: bytes, headers: list[tuple[bytes, bytes]],
                  method: str) -> None:  # fmt: skip
    headers = [(b"content-type", MARKDOWN.encode()), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})


# -- the surface -----------------------------------------------------------------------------------------------------
@dataclass
class LlmsSurface:
    """The llms.txt surface and its bounds (how much of the public graph each file lists)."""

    name: str = "llms"
    cors: bool = True  # crawlers' and pages' reads from other origins are answered (core.http.cors)
    paths: tuple[str, ...] = ("/llms.txt", "/llms-full.txt", "/tools/", "/types/", "/nodes/", "/resources/",
                              "/prompts/")  # fmt: skip
    max_nodes: int = 200  # public nodes listed in llms.txt, shared between the types
    max_full_nodes: int = 100  # node pages inlined in llms-full.txt
    max_type_nodes: int = 100  # public nodes listed on a node type's page
    max_neighbours: int = 200  # neighbours listed per edge type and direction on a node's page
    max_resource_chars: int = 32_000  # a resource's content is inlined up to this size
    max_cached: int = 4_096  # pages and reads kept per revision

    def app(self, host: SurfaceHost, registry: Registry) -> ASGIApp:
        return make_app(Site(host, registry, self))

    def artifacts(self, host: SurfaceHost) -> Mapping[str, str]:
        text = Site(host, host.registry, self).llms_txt()
        return {"llms.txt": text}

    def compare(self, old: Mapping[str, str], new: Mapping[str, str]) -> list[Finding]:
        return compare(old, new)


surface = LlmsSurface()
