"""The browser pages, in a real headless Chromium against a real `canon serve` that has no way out to the internet.

/docs must render Swagger UI's list of operations from the generated OpenAPI document, and /graphql (a browser
navigation, so `Accept: text/html`) must give a GraphiQL that runs a query and shows its result. Both load their
scripts and styles from /ui-assets/ (the copies canon ships: no `ui_assets` is set): a request anywhere else is
blocked and fails the test, as does any console error or failed request, so a page that only half works offline
cannot pass. Each test leaves a screenshot in its tmp_path for a person to look at.
"""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import expect

from tests.browser.conftest import WAIT_MS, Site, Watched, try_out

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")  # an OpenAPI path item's operations


def assert_clean(watched: Watched) -> None:
    """Nothing went wrong quietly: no console error, no failed request, nothing loaded from off the server."""
    problems = watched.problems()
    assert not problems, "\n".join(problems)


def test_docs_renders_the_operations_with_local_assets(site: Site, page: Watched, tmp_path: Path) -> None:
    loaded: list[str] = []
    page.page.on("response", lambda r: loaded.append(r.url) if "/ui-assets/" in r.url and r.ok else None)

    answer = page.page.goto(f"{site.base}/docs")  # returns once the page has loaded: its scripts and styles too
    assert answer is not None
    assert answer.status == 200, f"/docs answered {answer.status}: is the rest surface installed (canon.surfaces)?"
    assert_clean(page)  # fails fast, naming what did not load, rather than waiting for a page that cannot render

    operations = page.page.locator(".opblock")
    get_node = page.page.locator(".opblock-get", has=page.page.locator('[data-path="/api/nodes/{id}"]'))
    expect(get_node).to_be_visible(timeout=WAIT_MS)
    page.page.screenshot(path=tmp_path / "docs.png")
    notices = page.page.locator(".errors-wrapper")  # Swagger UI's boxes for errors and warnings about the document
    assert notices.count() == 0, notices.all_inner_texts()
    document = page.page.request.get(f"{site.base}/openapi.json").json()
    expect(operations).to_have_count(sum(1 for item in document["paths"].values() for m in item if m in METHODS))

    # the page works, not just renders: try get_node out on a public node, as a reader of the docs would
    assert try_out(get_node, {"id": site.public_id})["node"]["id"] == site.public_id
    page.page.screenshot(path=tmp_path / "docs-try-out.png")
    assert {url.removeprefix(site.base) for url in loaded} >= {  # (a browser may fetch the favicon, or not)
        "/ui-assets/swagger-ui-dist@5/swagger-ui-bundle.js",
        "/ui-assets/swagger-ui-dist@5/swagger-ui.css",
    }
    assert_clean(page)


def test_graphiql_runs_a_query_with_local_assets(site: Site, page: Watched, tmp_path: Path) -> None:
    answer = page.page.goto(f"{site.base}/graphql")
    assert answer is not None
    assert answer.status == 200, f"/graphql answered {answer.status}: is the graphql surface installed?"
    assert answer.request.headers["accept"].startswith("text/html")  # what makes /graphql answer with the page
    assert_clean(page)

    editor = page.page.locator(".graphiql-query-editor .CodeMirror")
    expect(editor).to_be_visible(timeout=WAIT_MS)
    query = f"{{ get_node(id: {json.dumps(site.public_id)}) {{ node {{ id }} }} }}"
    editor.click()
    page.page.keyboard.press("ControlOrMeta+A")
    page.page.keyboard.insert_text(query)  # typed as one input: no auto-closed brackets doubling up
    expect(editor).to_contain_text(query)
    page.page.locator(".graphiql-execute-button").click()

    result = page.page.locator(".graphiql-response")
    expect(result).to_contain_text(f'"id": "{site.public_id}"', timeout=WAIT_MS)
    page.page.screenshot(path=tmp_path / "graphiql.png", full_page=False)
    shown = json.loads(result.locator(".CodeMirror").evaluate("element => element.CodeMirror.getValue()"))
    assert shown == {"data": {"get_node": {"node": {"id": site.public_id}}}}
    assert_clean(page)
