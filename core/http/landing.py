"""The landing page at `/`: what this server serves, the model it serves, and how to connect an agent to it.

The host owns `/` (no surface may claim it: it would overlap every path): the page lists the MCP endpoint and every
installed surface's paths (links for exact paths), the served model's name, version and node types, and an
`.mcp.json` snippet whose URL is `[server] public_url`'s, else this server's as the request reached it (its scheme,
`Host` and path prefix). Links carry the path prefix (`[server] root_path`). Everything taken
from the model is HTML-escaped.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from html import escape
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse

from core.model import Model
from core.surfaces import Surface

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
    def path(p: str) -> str:
        return f"<code>{escape(p)}</code>" if p.endswith("/") else f'<a href="{escape(base + p)}">{escape(p)}</a>'

    rows = ["<li>mcp: <code>/mcp</code> (Streamable HTTP; for agents)</li>"]
    rows += [f"<li>{escape(s.name)}: {', '.join(path(p) for p in s.paths)}</li>" for s in surfaces]
    rows.append(f'<li>health: <a href="{escape(base)}/healthz">/healthz</a></li>')
    return "\n".join(rows)


def render(model: Model, surfaces: Sequence[Surface], base_url: str, *, token: bool) -> str:
    """The page for `model` served with `surfaces`, reached at `base_url` (ending in `/`)."""
    types = ", ".join(f"<code>{escape(name)}</code>" for name in model.node_types)
    base = urlsplit(base_url).path.rstrip("/")  # links stay on the host the page was reached at
    snippet = mcp_json(model.name, f"{base_url}mcp", token=token)
    auth = (" Set <code>CANON_TOKEN</code> to a token from <code>canon token create</code>." if token
            else " Reading public nodes needs no token; writing does (<code>canon token create</code>).")  # fmt: skip
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>canon: {escape(model.name)}</title><style>{STYLE}</style></head>
<body>
<h1>canon: {escape(model.name)} <small>{escape(model.version)}</small></h1>
<p>Node types: {types}.</p>
<h2>Surfaces</h2>
<ul>
{_surface_items(surfaces, base)}
</ul>
<h2>Connect an agent</h2>
<p>Put this in the <code>.mcp.json</code> of a project (or your MCP client's configuration).{auth}</p>
<pre>{escape(snippet)}</pre>
</body></html>
"""


def landing_endpoint(
    model: Callable[[], Model], surfaces: Sequence[Surface], *, anonymous: bool, public_url: str | None = None
) -> Callable[[Request], Awaitable[HTMLResponse]]:
    """The endpoint of `/`, for the model `model()` serves now and the installed `surfaces`, at `public_url` if
    given (else wherever the request says it reached)."""

    async def landing(request: Request) -> HTMLResponse:
        base_url = str(request.base_url) if public_url is None else f"{public_url}/"
        page = render(model(), surfaces, base_url, token=not anonymous)
        return HTMLResponse(page, headers={"Cache-Control": "no-cache"})

    return landing
