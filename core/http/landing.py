"""The landing page at `/`: what this server serves, the model it serves, and how to connect an agent to it.

The host owns `/` (no surface may claim it: it would overlap every path): the page lists the MCP endpoint and every
installed surface's paths (links for exact paths), the served model's name, version and node types, and an
`.mcp.json` snippet whose URL is `[server] public_url`'s, else this server's as the request reached it (its scheme,
`Host` and path prefix). With an OAuth issuer (`[oauth]`), the snippet is the URL alone (an OAuth-aware MCP client
follows the 401 challenge), and the bearer-token form is shown besides only while canon's token file holds tokens.
Links carry the path prefix (`[server] root_path`). Everything taken from the model is HTML-escaped.

The page names its caller (`#caller`): who a bearer token or a signed-in session is, with its roles and groups. With a
browser's sign-in (`[oauth] client_id`, `core.http.signin`) it offers to sign in, or, in a session, to sign out.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from html import escape
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse

from core.http.signin import SESSION
from core.lang.model import Model
from core.seam.surfaces import Surface, home_of, principal_of_scope
from core.values.principal import ANONYMOUS, Principal

__all__ = ["landing_endpoint", "mcp_json"]

STYLE = (
    "body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem}"
    "code,pre{background:#f4f4f4}pre{padding:.75rem;overflow:auto}"
)


def mcp_json(name: str, url: str, *, token: bool) -> str:
    """An `.mcp.json` connecting an agent to the MCP endpoint at `url` (with a bearer token when one is needed)."""
    server: dict[str, object] = {"type": "http", "url": url}
    if token:
        server["headers"] = {"Authorization": "Bearer ${CANON_TOKEN}"}
    return json.dumps({"mcpServers": {name: server}}, indent=2)


def _surface_items(surfaces: Sequence[Surface], base: str) -> str:
    def path(p: str, home: str | None) -> str:
        linked = p == home or not p.endswith("/")  # a prefix is linked only when it is where a person starts
        return f'<a href="{escape(base + p)}">{escape(p)}</a>' if linked else f"<code>{escape(p)}</code>"

    rows = ["<li>mcp: <code>/mcp</code> (Streamable HTTP; for agents)</li>"]
    rows += [f"<li>{escape(s.name)}: {', '.join(path(p, home_of(s)) for p in s.paths)}</li>" for s in surfaces]
    rows.append(f'<li>health: <a href="{escape(base)}/healthz">/healthz</a></li>')
    return "\n".join(rows)


def _connect(name: str, url: str, *, token: bool, issuer: str | None, static: bool) -> str:
    """How an agent connects: with an OAuth issuer, the URL alone (the client follows the 401 challenge to it), and
    the bearer-token form only when canon's own tokens are in use; without one, the token form when one is needed."""
    if issuer is None:
        auth = _TOKEN_NEEDED if token else _TOKEN_TO_WRITE
        return f"<p>{_PUT}{auth}</p>\n<pre>{escape(mcp_json(name, url, token=token))}</pre>"
    signs_in = ("An MCP client that supports OAuth needs only the URL: it follows canon's 401 challenge to "
                f"<code>{escape(issuer)}</code> and signs you in there.")  # fmt: skip
    if not token:
        signs_in += " (Anonymous access is on, so a client signs in only when a write asks for it.)"
    parts = [f"<p>{_PUT} {signs_in}</p>", f"<pre>{escape(mcp_json(name, url, token=False))}</pre>"]
    if static:
        parts.append("<p>A client without OAuth sends a token from <code>canon token create</code> instead, in "
                     "<code>CANON_TOKEN</code>:</p>")  # fmt: skip
        parts.append(f"<pre>{escape(mcp_json(name, url, token=True))}</pre>")
    return "\n".join(parts)


_TOKEN_NEEDED = " Set <code>CANON_TOKEN</code> to a token from <code>canon token create</code>."
_TOKEN_TO_WRITE = " Reading public nodes needs no token; writing does (<code>canon token create</code>)."
_PUT = "Put this in the <code>.mcp.json</code> of a project (or your MCP client's configuration)."


def _caller(principal: Principal, base: str, *, session: bool, signs_in: bool) -> str:
    """Who the page is served to, and the way to sign in or out (with a browser's sign-in)."""
    if principal == ANONYMOUS:
        link = f' <a href="{escape(base)}/signin">Sign in</a>' if signs_in else ""
        return f'<div id="caller">Not signed in: you see public nodes only.{link}</div>' if signs_in or link else ""
    roles = ", ".join(sorted(principal.roles)) or "none"
    groups = ", ".join(sorted(principal.groups)) or "none"
    who = (f'<span class="name">{escape(principal.name)}</span> (roles: <span class="roles">{escape(roles)}</span>; '
           f'groups: <span class="groups">{escape(groups)}</span>)')  # fmt: skip
    if not session:
        return f'<div id="caller">Calling as {who}, by bearer token.</div>'
    out = (f'<form method="post" action="{escape(base)}/signout" style="display:inline">'
           '<button type="submit">Sign out</button></form>')  # fmt: skip
    return f'<div id="caller">Signed in as {who}. {out}</div>'


def render(model: Model, surfaces: Sequence[Surface], base_url: str, *, token: bool, issuer: str | None = None,
           static: bool = True, principal: Principal = ANONYMOUS, session: bool = False,
           signs_in: bool = False) -> str:  # fmt: skip
    """The page for `model` served with `surfaces`, reached at `base_url` (ending in `/`); `issuer` is the OAuth
    issuer whose tokens canon accepts, if any, and `static` whether canon's own tokens are in use; `principal` is
    the caller (`session`: by its session cookie), `signs_in` whether browsers sign in with the issuer."""
    types = ", ".join(f"<code>{escape(name)}</code>" for name in model.node_types)
    base = urlsplit(base_url).path.rstrip("/")  # links stay on the host the page was reached at
    connect = _connect(model.name, f"{base_url}mcp", token=token, issuer=issuer, static=static)
    caller = _caller(principal, base, session=session, signs_in=signs_in)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>canon: {escape(model.name)}</title><style>{STYLE}</style></head>
<body>
<h1>canon: {escape(model.name)} <small>{escape(model.version)}</small></h1>
{caller}
<p>Node types: {types}.</p>
<h2>Surfaces</h2>
<ul>
{_surface_items(surfaces, base)}
</ul>
<h2>Connect an agent</h2>
{connect}
</body></html>
"""


def landing_endpoint(
    model: Callable[[], Model], surfaces: Sequence[Surface], *, anonymous: bool, public_url: str | None = None,
    issuer: str | None = None, static_tokens: Callable[[], bool] = lambda: True, signs_in: bool = False,
) -> Callable[[Request], Awaitable[HTMLResponse]]:  # fmt: skip
    """The endpoint of `/`, for the model `model()` serves now and the installed `surfaces`, at `public_url` if
    given (else wherever the request says it reached); `issuer` is the OAuth issuer, if one is configured, and
    `static_tokens()` whether canon's own token file holds tokens now; `signs_in` whether browsers sign in."""

    async def landing(request: Request) -> HTMLResponse:
        base_url = str(request.base_url) if public_url is None else f"{public_url}/"
        page = render(model(), surfaces, base_url, token=not anonymous, issuer=issuer,
                      static=issuer is None or static_tokens(), principal=principal_of_scope(request.scope),
                      session=request.scope.get(SESSION) is True, signs_in=signs_in)  # fmt: skip
        # the page names its caller: never kept by a cache, shared or not
        return HTMLResponse(page, headers={"Cache-Control": "no-store", "Vary": "Authorization, Cookie"})

    return landing
