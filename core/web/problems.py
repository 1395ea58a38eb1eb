"""How the HTTP host answers an error: one RFC 9457 problem document, from one mapping, on every route.

Every error answer of the app, whatever route gave it (a surface, the router, the host's own checks), is
`application/problem+json`::

    {"type": "urn:canon:problem:<code>", "title": ..., "status": ..., "detail": ..., "instance": <path>,
     "code": <code>, "errors": [{pointer, message}], ...extra fields of the error}

`STATUS` maps each code to its HTTP status: canon's error codes (`core.values.errors`) and the codes of errors the HTTP
layer itself finds (no such route, a wrong method, a body too large, a foreign Host or Origin). `ProblemAnswers`,
the app's outermost layer, turns an error answer that is not JSON (a framework's plain-text 404 or 405, say) into
the same document, keeping its headers (`Allow`). Its `instance` is the path the client asked for, the prefix a
proxy forwards (`[server] root_path`, taken off the path by `core.http.prefix`) included: the routes inside write
the path they see, and `ProblemAnswers` puts the prefix back in front of it. Only `/mcp` answers otherwise, since
MCP fixes its bodies: JSON-RPC errors there stay JSON-RPC (`refuse` answers `/mcp` with a JSON-RPC error without an id).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "MCP_PATH",
    "PAGE_ANSWER",
    "PROBLEM_MEDIA",
    "STATUS",
    "ProblemAnswers",
    "code_of_status",
    "internal_error",
    "problem_body",
    "refuse",
    "request_path",
    "send_problem",
]

MCP_PATH = "/mcp"
PROBLEM_MEDIA = "application/problem+json"

STATUS: dict[str, int] = {
    # canon's error codes (core.values.errors)
    "invalid_arguments": 400, "invalid": 400, "import_error": 400, "forbidden": 403, "not_found": 404,
    "unknown_tool": 404, "conflict": 409, "gone": 410, "limit_exceeded": 422,
    # what the HTTP layer finds before any tool runs
    "bad_request": 400, "unauthorized": 401, "origin_not_allowed": 403, "no_route": 404, "method_not_allowed": 405,
    "not_acceptable": 406, "too_large": 413, "unsupported_media_type": 415, "host_not_allowed": 421,
    "internal": 500, "unavailable": 503,
    # what a surface makes of a canon error: a conflict on a request that carried If-Match (REST keeps its code)
    "precondition_failed": 412,
}  # fmt: skip
"""code -> HTTP status, the one table every HTTP surface answers with and the OpenAPI document states; a canon
error whose code is not here is a 500 (a bug or a broken store, never bad input)."""

TITLES: dict[str, str] = {
    "invalid_arguments": "Invalid arguments", "invalid": "Invalid data", "forbidden": "Forbidden",
    "not_found": "Not found", "conflict": "Conflict", "limit_exceeded": "Limit exceeded",
    "no_route": "No such route", "origin_not_allowed": "Origin not allowed", "host_not_allowed": "Host not allowed",
    "too_large": "Request body too large",
}  # fmt: skip
"""code -> title, where the status's own phrase would say less."""

_BY_STATUS = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "no_route", 405: "method_not_allowed",
    406: "not_acceptable", 413: "too_large", 415: "unsupported_media_type", 500: "internal", 503: "unavailable",
}  # fmt: skip
"""HTTP status -> the code of an error answer that came with a status alone (a framework's 404, say)."""


def code_of_status(status: int) -> str:
    """The code of an error answer that came with a status alone (a framework's 404, say)."""
    known = _BY_STATUS.get(status)
    if known is not None:
        return known
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "bad_request" if status < 500 else "internal"


def request_path(scope: Scope) -> str:
    """The path as the client sent it: under `[server] root_path`, the prefix (`app_root_path`) and the path."""
    return str(scope.get("app_root_path", "")) + str(scope.get("path", ""))


def problem_body(status: int, code: str, detail: str, instance: str, errors: Sequence[Mapping[str, Any]] = (),
                 extra: Mapping[str, Any] | None = None) -> bytes:  # fmt: skip
    """The problem document (UTF-8 JSON) for one error."""
    title = TITLES.get(code) or _phrase(status) or "Error"
    body: dict[str, Any] = {"type": f"urn:canon:problem:{code}", "title": title, "status": status,
                            "detail": detail, "instance": instance, "code": code,
                            "errors": [dict(e) for e in errors], **(extra or {})}  # fmt: skip
    return json.dumps(body, ensure_ascii=False).encode()


async def send_problem(send: Send, scope: Scope, status: int, code: str, detail: str, *,
                       headers: Sequence[tuple[bytes, bytes]] = (), errors: Sequence[Mapping[str, Any]] = (),
                       extra: Mapping[str, Any] | None = None) -> None:  # fmt: skip
    """Answer a plain ASGI request with a problem (no body on HEAD)."""
    body = problem_body(status, code, detail, request_path(scope), errors, extra)
    await _send(send, scope, status, PROBLEM_MEDIA.encode(), body, headers)


async def refuse(send: Send, scope: Scope, code: str, detail: str, **extra: Any) -> None:
    """Refuse a request before it reaches a route: a problem, or on `/mcp` a JSON-RPC error without an id (the
    body MCP asks for), each with the status `STATUS` gives `code`."""
    status = STATUS[code]
    if scope.get("path") != MCP_PATH:
        await send_problem(send, scope, status, code, detail, extra=extra)
        return
    error = {"code": -32600, "message": detail, "data": {"code": code, **extra}}
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}, ensure_ascii=False).encode()
    await _send(send, scope, status, b"application/json", body, ())


async def _send(send: Send, scope: Scope, status: int, media: bytes, body: bytes,
                headers: Sequence[tuple[bytes, bytes]]) -> None:  # fmt: skip
    head = [(b"content-type", media), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": b"" if scope.get("method") == "HEAD" else body})


async def internal_error(request: Request, exc: Exception) -> Response:
    """What an exception no route handled is answered with (the server's log has the traceback)."""
    detail = "The server failed to answer; the error is in its log."
    if request.url.path == MCP_PATH:
        error = {"code": -32603, "message": detail, "data": {"code": "internal"}}
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
        return Response(body, status_code=500, media_type="application/json")
    body = problem_body(500, "internal", detail, request_path(request.scope))
    return Response(body, status_code=500, media_type=PROBLEM_MEDIA)


_KEPT = (b"allow", b"www-authenticate", b"retry-after")  # headers of an error answer that still mean something
_TEXT_DETAIL = 300  # a plain-text error body up to this size becomes the problem's detail


PAGE_ANSWER = "canon.page_answer"
"""The scope key a route sets (True) when its error answer is a page written for a person, to pass unchanged."""


class ProblemAnswers:
    """The app's outermost layer: an error answer (4xx, 5xx) that is not JSON becomes a problem document.

    JSON answers pass unchanged: problems already, and protocol bodies (GraphQL's errors, MCP's JSON-RPC), but for
    a problem's `instance` under a path prefix: a route wrote the path it saw, without the prefix, and the prefix
    goes back in front. `/mcp` passes unchanged whatever it answers, and so does a page for people whose route put
    `PAGE_ANSWER` in the scope (the sign-in's error pages, `core.http.signin`). A short plain-text body (a
    framework's own message) is kept as the detail; any other body (HTML, Markdown) is replaced by a sentence naming
    the method and path.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == MCP_PATH:
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        text = bytearray()

        prefixed = bool(scope.get("app_root_path")) and scope.get("method") != "HEAD"  # a HEAD answer has no body
        problem: Message | None = None  # a problem's start, held while its body comes, to put the prefix back

        async def watch(message: Message) -> None:
            nonlocal held, problem
            if message["type"] == "http.response.start" and message["status"] >= 400 and not scope.get(PAGE_ANSWER):
                if not _is_json(message):
                    held = message
                    return
                if prefixed and _media(message) == PROBLEM_MEDIA.encode():
                    problem = message
                    return
            if problem is not None and message["type"] == "http.response.body":
                text.extend(message.get("body", b""))
                if not message.get("more_body", False):
                    await self._prefix(scope, send, problem, bytes(text))
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            if len(text) <= _TEXT_DETAIL:
                text.extend(message.get("body", b"")[: _TEXT_DETAIL + 1])
            if not message.get("more_body", False):
                await self._replace(scope, send, held, bytes(text))

        await self.app(scope, receive, watch)

    @staticmethod
    async def _prefix(scope: Scope, send: Send, start: Message, body: bytes) -> None:
        """Send the problem `body` with `instance` as the client sent the path, if the route wrote the path it saw."""
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        if isinstance(document, dict) and document.get("instance") == scope.get("path"):  # pyright: ignore[reportUnknownMemberType]
            document["instance"] = request_path(scope)
            body = json.dumps(document, ensure_ascii=False).encode()
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    @staticmethod
    async def _replace(scope: Scope, send: Send, start: Message, text: bytes) -> None:
        status: int = start["status"]
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() in _KEPT]
        media = next((v for k, v in start.get("headers", []) if k.lower() == b"content-type"), b"")
        detail = ""
        if media.startswith(b"text/plain") and 0 < len(text.strip()) <= _TEXT_DETAIL:
            detail = text.decode("utf-8", "replace").strip()
        if not detail or detail.lower() == _phrase(status).lower():  # a bare "Not Found" says less than ours
            detail = _detail(scope, status)
        await send_problem(send, scope, status, code_of_status(status), detail, headers=headers)


def _media(start: Message) -> bytes:
    """The media type of a response, without parameters, in lower case (b"" when it has none)."""
    for key, value in start.get("headers", []):
        if key.lower() == b"content-type":
            return bytes(value).split(b";")[0].strip().lower()
    return b""


def _is_json(start: Message) -> bool:
    media = _media(start)
    return media == b"application/json" or media.endswith(b"+json")


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _detail(scope: Scope, status: int) -> str:
    where = f"{scope.get('method', '')} {scope.get('path', '')}"
    if status == 404:
        return f"Nothing is served at {scope.get('path', '')}."
    if status == 405:
        return f"{where} is not served; the Allow header lists the methods that are."
    return f"{where}: {_phrase(status) or f'status {status}'}."
