"""The browser pages with OAuth configured and anonymous access off, in a real headless Chromium against `canon serve`.

The pages themselves are shells that hold no data: they load without a token. What they call does not: Swagger
UI's `/openapi.json` and GraphiQL's queries are refused (401) until the reader gives a token (here an access token
of a real local issuer, `tests.http.test_oauth`), in the docs page's token field and in GraphiQL's headers editor,
which opens ready for it. GraphiQL opens on a query for the served model, which then runs as it stands.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import WAIT_MS, Site, Watched, public_node_id, try_out
from tests.conftest import copy_store
from tests.http.test_oauth import RESOURCE, Issuer, running_issuer
from tests.mcp.conftest import serving


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with running_issuer() as running:
        yield running


@pytest.fixture(scope="module")
def site(seed_template: Path, tmp_path_factory: pytest.TempPathFactory, issuer: Issuer) -> Iterator[Site]:
    """`canon serve` trusting the issuer, with anonymous access off (as docs/operations/oauth.md advises)."""
    folder = tmp_path_factory.mktemp("oauth-site")
    store = copy_store(seed_template, folder / "canon.db")
    (folder / "canon.toml").write_text(f'[oauth]\nissuer = "{issuer.url}"\nresource = "{RESOURCE}"\n\n'
                                       "[auth]\nanonymous = false\n", encoding="utf-8")  # fmt: skip
    with serving(store, cwd=folder) as process:
        yield Site(process.base, public_node_id(store))
        assert process.popen.poll() is None, f"canon serve exited:\n{process.output()}"


def test_docs_loads_without_a_token_and_shows_the_operations_once_given_one(
    site: Site, page: Watched, issuer: Issuer, tmp_path: Path
) -> None:
    answer = page.page.goto(f"{site.base}/docs")
    assert answer is not None
    assert answer.status == 200
    get_node = page.page.locator(".opblock-get", has=page.page.locator('[data-path="/api/nodes/{id}"]'))
    expect(page.page.locator("#swagger-ui")).to_contain_text("Failed to load API definition", timeout=WAIT_MS)
    assert page.failed == [f"GET {site.base}/openapi.json: 401"]  # the document holds the model: it needs a token

    page.page.locator("#canon-token-value").fill(issuer.token())
    page.page.locator("#canon-token button").click()
    expect(get_node).to_be_visible(timeout=WAIT_MS)
    assert try_out(get_node, {"id": site.public_id})["node"]["id"] == site.public_id
    page.page.screenshot(path=tmp_path / "docs-with-token.png")
    assert page.failed == [f"GET {site.base}/openapi.json: 401"]  # that one, before the token; nothing since
    assert [p for p in page.problems() if "401" not in p] == []


SET_HEADERS = """(headers) => {
  const editors = [...document.querySelectorAll(".CodeMirror")].map((element) => element.CodeMirror);
  const editor = editors.find((cm) => cm.getValue().includes("Authorization"));
  if (!editor) return null;
  const before = editor.getValue();
  editor.setValue(headers);
  return before;
}"""


def test_graphiql_loads_without_a_token_on_a_query_for_this_model_that_runs_once_given_one(
    site: Site, page: Watched, issuer: Issuer, tmp_path: Path
) -> None:
    with page.page.expect_response(lambda r: r.url == f"{site.base}/graphql" and r.request.method == "POST") as schema:
        answer = page.page.goto(f"{site.base}/graphql")  # GraphiQL asks for the schema at once, with no token yet
    assert answer is not None
    assert answer.status == 200
    assert schema.value.status == 401
    editor = page.page.locator(".graphiql-query-editor .CodeMirror")
    expect(editor).to_be_visible(timeout=WAIT_MS)
    shown = editor.evaluate("element => element.CodeMirror.getValue()")
    assert "Welcome to GraphiQL" not in shown
    assert "get_node(id: " in shown

    before = page.page.evaluate(SET_HEADERS, json.dumps({"Authorization": f"Bearer {issuer.token()}"}))
    assert before is not None
    assert json.loads(before) == {"Authorization": "Bearer "}  # the headers editor opened ready for a token
    page.page.locator(".graphiql-execute-button").click()
    result = page.page.locator(".graphiql-response")
    expect(result).to_contain_text('"get_neighbors"', timeout=WAIT_MS)
    page.page.screenshot(path=tmp_path / "graphiql-with-token.png", full_page=False)
    data = json.loads(result.locator(".CodeMirror").evaluate("element => element.CodeMirror.getValue()"))
    assert "errors" not in data, data
    assert data["data"]["get_node"]["node"]["id"]
    assert data["data"]["get_neighbors"]["total"] > 0
    assert [p for p in page.problems() if "401" not in p] == []  # only the refusals before the token
