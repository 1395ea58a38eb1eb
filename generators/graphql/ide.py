"""GraphiQL at `/graphql`: strawberry's page, opened on a query for this model, ready for a bearer token.

The page is a shell that holds no data (`shows_ide`, the GraphQL surface's `page_shell`): the host serves it
without a token even when anonymous access is off, and every query it sends carries the token in its headers.
Its changes to strawberry's page:

* the query editor opens on `example_query`, one that runs against the served model (the registry's examples,
  as the tool descriptions and llms pages name them: a real public node and its neighbours), instead of
  GraphiQL's welcome comment;
* the headers editor opens on `{"Authorization": "Bearer "}`, for the token to be pasted in; an Authorization
  header with no token after `Bearer` is left out of the request, so the page still reads anonymously where that
  is allowed.

strawberry's page is edited at fixed places (`_EDITS`); if a new strawberry version moves one, building the page
fails loudly instead of shipping a page that silently lost a change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

from core.dispatch.examples import Examples
from core.dispatch.registry import Registry

__all__ = ["DEFAULT_HEADERS", "example_query", "ide_page", "scope_shows_ide", "shows_ide"]

DEFAULT_HEADERS = '{"Authorization": "Bearer "}'


def shows_ide(method: str, query: str | None, accept: str) -> bool:
    """Whether a request is for GraphiQL rather than for a query: a GET with no `query` parameter that accepts
    HTML (a browser's navigation). The view renders the page exactly when the host let it in as a page shell."""
    return method == "GET" and query is None and "text/html" in accept


def scope_shows_ide(scope: Mapping[str, Any]) -> bool:
    """`shows_ide` for an ASGI request scope."""
    if scope["type"] != "http" or scope["path"] != "/graphql":
        return False
    params = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"), keep_blank_values=True)
    accept = ",".join(bytes(v).decode("latin-1") for k, v in scope["headers"] if bytes(k).lower() == b"accept")
    return shows_ide(scope["method"], params["query"][0] if "query" in params else None, accept)


def example_query(registry: Registry) -> str:
    """A query for this model that runs as it stands: a public node of the data (or the model's first type, when
    there is none) and its neighbours."""
    model = registry.model
    examples = registry.examples or Examples.of_model(model)
    node = json.dumps(examples.id)
    title = " ".join(f"{model.name} {model.version}".split())
    return f"""# canon: the {title} model. Ctrl-Enter runs this query; the Docs pane lists every field.
# Where a token is needed, paste it after "Bearer " in the Headers pane below.
{{
  get_node(id: {node}) {{
    node {{
      id
      type
    }}
  }}
  get_neighbors(id: {node}, limit: 5) {{
    total
    items {{
      depth
      edge {{
        type
        source
        target
      }}
      node {{
        id
        type
      }}
    }}
  }}
}}
"""


def _script_value(value: str) -> str:
    """`value` as a JavaScript string literal that cannot end the `<script>` it is in."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_HEADERS = _script_value(DEFAULT_HEADERS)
_BLANK_BEARER = """
      function withoutBlankBearer(fetch) {
        return (params, options) => {
          const headers = Object.assign({}, options && options.headers);
          for (const name of Object.keys(headers)) {
            if (name.toLowerCase() === "authorization" && /^bearer\\s*$/i.test(String(headers[name]))) {
              delete headers[name];
            }
          }
          return fetch(params, Object.assign({}, options, { headers }));
        };
      }
"""


def _edits(query: str) -> tuple[tuple[str, str], ...]:
    return (
        ("const EXAMPLE_QUERY = `", f"const EXAMPLE_QUERY = {_script_value(query)};\n      const WELCOME = `"),
        (
            "React.useState(parameters.headers)",
            f"React.useState(parameters.headers || {_script_value(DEFAULT_HEADERS)})",
        ),
        ("fetcher: fetcher,", "fetcher: withoutBlankBearer(fetcher),"),
        ("function GraphiQLWithExplorer() {", _BLANK_BEARER + "\n      function GraphiQLWithExplorer() {"),
    )


def ide_page(html: str, registry: Registry) -> str:
    """strawberry's GraphiQL page `html`, opened on `example_query(registry)` with the bearer header ready."""
    for anchor, replacement in _edits(example_query(registry)):
        if html.count(anchor) != 1:
            raise RuntimeError(f"strawberry's GraphiQL page changed: {anchor!r} is not in it once; update {__name__}")
        html = html.replace(anchor, replacement)
    return html
