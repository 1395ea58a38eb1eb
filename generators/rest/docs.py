"""The `/docs` page: Swagger UI over `/openapi.json`, a page shell that holds no data.

The host serves it without a token even when anonymous access is off (`is_docs_page`, the REST surface's
`page_shell`); the calls the page makes carry one. Swagger UI's Authorize button takes a bearer token for the
operations (the document's `bearer` security scheme); the page's own token field above it holds one for the
document itself, which needs a token when anonymous access is off, and the page's `requestInterceptor` adds that
token to every request that carries none (the document, and each "Try it out"). The token stays in the tab's
`sessionStorage`; the page never sends it anywhere but this server.

The scripts and styles are Swagger UI's, from the host's `/ui-assets/` (shipped with canon), so the page works
without a network.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from typing import Any

__all__ = ["DOCS_PATH", "docs_page", "is_docs_page"]

DOCS_PATH = "/docs"
ASSETS = "/ui-assets/swagger-ui-dist@5"


def is_docs_page(scope: Mapping[str, Any]) -> bool:
    """Whether a request is for the page itself (a GET or HEAD of `/docs`), not for anything it shows."""
    return scope["type"] == "http" and scope["path"] == DOCS_PATH and scope["method"] in ("GET", "HEAD")


_TOKEN_FORM = """<form id="canon-token" style="font:14px sans-serif;padding:.5rem 1rem;background:#f4f4f4">
<label>Bearer token <input id="canon-token-value" type="password" autocomplete="off" size="40"></label>
<button type="submit">Use</button>
<span>This server answers only callers with a token: a token from <code>canon token create</code>, or an access
token of the identity provider it trusts. It stays in this tab.</span>
</form>
"""

_SCRIPT = """const canonToken = () => sessionStorage.getItem("canon.token");
const ui = SwaggerUIBundle({
  url: %(openapi)s,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  requestInterceptor: (request) => {
    const token = canonToken();
    if (token && !request.headers.Authorization) request.headers.Authorization = "Bearer " + token;
    return request;
  },
});
const form = document.getElementById("canon-token");
if (form) {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("canon.token", document.getElementById("canon-token-value").value.trim());
    ui.specActions.download(%(openapi)s);
  });
}
"""


def docs_page(title: str, base_url: str, *, token_form: bool) -> str:
    """The page, its links under `base_url` (`[server] public_url` or `root_path`); with `token_form` (anonymous
    access off), the field for the token the document itself needs."""
    openapi = json.dumps(f"{base_url}/openapi.json").replace("<", "\\u003c")
    assets = escape(base_url + ASSETS)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link type="text/css" rel="stylesheet" href="{assets}/swagger-ui.css">
<link rel="shortcut icon" href="{assets}/favicon-32x32.png">
<title>{escape(title)}</title>
</head><body>
{_TOKEN_FORM if token_form else ""}<div id="swagger-ui"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script>
{_SCRIPT % {"openapi": openapi}}</script>
</body></html>
"""
