"""The administration commands, run as a user runs them: `canon token create|revoke|list` and `canon audit`.

Tokens: printed once on standard output, only their SHA-256 kept, in a file only its owner may read; errors name
what is wrong and exit non-zero. `TokenFile.verify` (what a running server asks on every request) is the
reference for which tokens are current.

Audit: a store whose audit log holds a known set of records (made through the one dispatch path, as every surface
makes them), read back with each filter, `--json`, `--limit` and `--since`.
"""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from core.dispatch.dispatcher import OUTCOMES
from core.ops.config import Config
from core.ops.tokens import TOKEN_PREFIX, TokenFile
from core.seam.instance import open_instance
from core.values.principal import ANONYMOUS, Principal
from tests.conftest import run_canon

TOKEN_FILE = "canon-tokens.json"  # the default, in the working directory
EXIT_PROBLEMS, EXIT_USAGE = 1, 2


def create(folder: Path, name: str, role: str, *groups: str, env: dict[str, str] | None = None) -> str:
    """`canon token create`; the token it printed (checked to be all it printed on stdout)."""
    flags = [arg for group in groups for arg in ("--group", group)]
    done = run_canon("token", "create", name, "--role", role, *flags, cwd=folder, env=env)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert done.stdout == token + "\n"
    return token


def make(folder: Path, name: str, role: str, *groups: str) -> str:
    """Set-up for tests of the other commands: a token made in-process, as `canon token create` makes it."""
    return TokenFile(folder / TOKEN_FILE).create(name, role, groups)


def entries(path: Path) -> list[dict[str, Any]]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    tokens: list[dict[str, Any]] = document["tokens"]
    return tokens


# -- canon token create ---------------------------------------------------------------------------------------------
def test_create_prints_the_token_once_and_keeps_only_its_sha256(tmp_path: Path) -> None:
    done = run_canon("token", "create", "rita", "--role", "reader", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert done.stdout == token + "\n"  # the token and nothing else on stdout, for `$(canon token create ...)`
    assert token.startswith(TOKEN_PREFIX)
    assert len(token) >= len(TOKEN_PREFIX) + 43  # 32 random bytes, URL-safe base64
    assert token not in done.stderr
    assert "rita" in done.stderr
    path = tmp_path / TOKEN_FILE
    text = path.read_text(encoding="utf-8")
    assert token not in text
    assert token.removeprefix(TOKEN_PREFIX) not in text
    [entry] = entries(path)
    assert entry["name"] == "rita"
    assert entry["role"] == "reader"
    assert entry["groups"] == []
    assert entry["sha256"] == hashlib.sha256(token.encode()).hexdigest()


def test_the_token_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    create(tmp_path, "rita", "reader")
    assert stat.S_IMODE((tmp_path / TOKEN_FILE).stat().st_mode) == 0o600
    make(tmp_path, "wendy", "writer")
    (tmp_path / TOKEN_FILE).chmod(0o644)  # loosened by hand: the next rewrite makes it private again
    assert run_canon("token", "revoke", "wendy", cwd=tmp_path).returncode == 0
    assert stat.S_IMODE((tmp_path / TOKEN_FILE).stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [TOKEN_FILE]  # no temporary file left behind


def test_created_tokens_verify_as_their_principal_and_differ(tmp_path: Path) -> None:
    rita = create(tmp_path, "rita", "reader")
    pat = create(tmp_path, "pat", "reader", "payments", "ml", "payments")
    alice = create(tmp_path, "alice@example.com", "admin")

    tokens = TokenFile(tmp_path / TOKEN_FILE)
    assert tokens.verify(rita) == Principal("rita", frozenset({"reader"}))
    assert tokens.verify(pat) == Principal("pat", frozenset({"reader"}), frozenset({"payments", "ml"}))
    assert tokens.verify(alice) == Principal("alice@example.com", frozenset({"admin"}))
    assert len({rita, pat, alice}) == 3
    assert tokens.verify(rita + "x") is None
    assert tokens.verify(rita.removeprefix(TOKEN_PREFIX)) is None


def test_a_duplicate_name_is_refused_naming_it_and_the_first_token_stays_current(tmp_path: Path) -> None:
    first = make(tmp_path, "rita", "reader")
    before = (tmp_path / TOKEN_FILE).read_bytes()

    done = run_canon("token", "create", "rita", "--role", "admin", cwd=tmp_path)

    assert done.returncode == EXIT_PROBLEMS
    assert done.stdout == ""  # no token was made, so none is printed
    assert "'rita'" in done.stderr
    assert "exists" in done.stderr
    assert (tmp_path / TOKEN_FILE).read_bytes() == before
    assert TokenFile(tmp_path / TOKEN_FILE).verify(first) == Principal("rita", frozenset({"reader"}))


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("two words", "'two words'"),
        ("-", "'-'"),
        ("x" * 129, "x" * 129),
        ("ümlaut", "'ümlaut'"),
        ("a/b", "'a/b'"),
        ("anonymous", "'anonymous' is reserved"),
    ],
    ids=["space", "dash-only", "too-long", "non-ascii", "slash", "reserved"],
)
def test_a_bad_name_is_refused_naming_it_and_nothing_is_written(tmp_path: Path, name: str, shown: str) -> None:
    done = run_canon("token", "create", "--role", "reader", "--", name, cwd=tmp_path)

    assert done.returncode == EXIT_PROBLEMS
    assert done.stdout == ""
    assert shown in done.stderr
    assert "/name" in done.stderr
    assert not (tmp_path / TOKEN_FILE).exists()


def test_a_name_of_128_characters_is_accepted(tmp_path: Path) -> None:
    token = create(tmp_path, "n" * 128, "reader")
    assert TokenFile(tmp_path / TOKEN_FILE).verify(token) == Principal("n" * 128, frozenset({"reader"}))


@pytest.mark.parametrize("role", ["superuser", "Admin", ""])
def test_a_bad_role_is_a_usage_error_listing_the_roles(tmp_path: Path, role: str) -> None:
    done = run_canon("token", "create", "rita", "--role", role, cwd=tmp_path)

    assert done.returncode == EXIT_USAGE
    assert done.stdout == ""
    assert all(r in done.stderr for r in ("reader", "writer", "admin"))
    assert not (tmp_path / TOKEN_FILE).exists()


def test_a_missing_role_is_a_usage_error(tmp_path: Path) -> None:
    done = run_canon("token", "create", "rita", cwd=tmp_path)

    assert done.returncode == EXIT_USAGE
    assert "--role" in done.stderr
    assert not (tmp_path / TOKEN_FILE).exists()


def test_a_bad_group_is_refused_naming_it(tmp_path: Path) -> None:
    done = run_canon("token", "create", "pat", "--role", "reader", "--group", "payments", "--group", "no good",
                     cwd=tmp_path)  # fmt: skip

    assert done.returncode == EXIT_PROBLEMS
    assert done.stdout == ""
    assert "/groups/1: 'no good'" in done.stderr  # its position as given
    assert not (tmp_path / TOKEN_FILE).exists()


def test_token_without_an_action_is_a_usage_error(tmp_path: Path) -> None:
    done = run_canon("token", cwd=tmp_path)

    assert done.returncode == EXIT_USAGE
    assert all(action in done.stderr for action in ("create", "revoke", "list"))


# -- where the token file is ----------------------------------------------------------------------------------------
def test_canon_tokens_in_the_environment_names_the_token_file(tmp_path: Path) -> None:
    elsewhere = tmp_path / "secrets" / "tokens.json"
    env = {"CANON_TOKENS": str(elsewhere)}

    token = create(tmp_path, "rita", "reader", env=env)
    listed = run_canon("token", "list", cwd=tmp_path, env=env)
    default_listed = run_canon("token", "list", cwd=tmp_path)

    assert TokenFile(elsewhere).verify(token) is not None
    assert not (tmp_path / TOKEN_FILE).exists()
    assert listed.stdout.startswith("rita\t")
    assert default_listed.stdout == ""  # the default file does not exist: no tokens


def test_the_configuration_names_the_token_file_relative_to_itself(tmp_path: Path) -> None:
    config = tmp_path / "etc" / "canon.toml"
    config.parent.mkdir()
    config.write_text('[auth]\ntokens = "tokens/canon.json"\n', encoding="utf-8")

    done = run_canon("--config", str(config), "token", "create", "rita", "--role", "reader", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert TokenFile(tmp_path / "etc" / "tokens" / "canon.json").verify(done.stdout.strip()) is not None
    assert stat.S_IMODE((tmp_path / "etc" / "tokens" / "canon.json").stat().st_mode) == 0o600


@pytest.mark.parametrize("prefix", [None, "kc-"], ids=["default", "configured"])
def test_a_name_in_the_oauth_issuers_namespace_is_refused(tmp_path: Path, prefix: str | None) -> None:
    setting = "" if prefix is None else f'name_prefix = "{prefix}"\n'
    oauth = f'[oauth]\nissuer = "https://login.example.com"\nresource = "https://canon.example.com"\n{setting}'
    (tmp_path / "canon.toml").write_text(oauth, encoding="utf-8")
    name = f"{prefix or 'oauth.'}alice"

    refused = run_canon("token", "create", name, "--role", "reader", cwd=tmp_path)
    allowed = run_canon("token", "create", "alice", "--role", "reader", cwd=tmp_path)

    assert refused.returncode == EXIT_PROBLEMS
    assert f"{name!r} starts with {prefix or 'oauth.'!r}" in refused.stderr
    assert "/name" in refused.stderr
    assert allowed.returncode == 0, allowed.stderr


# -- tokens that expire --------------------------------------------------------------------------------------------
def test_create_with_expires_in_records_the_expiry_and_list_shows_it(tmp_path: Path) -> None:
    done = run_canon("token", "create", "temp", "--role", "reader", "--expires-in", "2h", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert TokenFile(tmp_path / TOKEN_FILE).verify(done.stdout.strip()) == Principal("temp", frozenset({"reader"}))
    expires = datetime.fromisoformat(entries(tmp_path / TOKEN_FILE)[0]["expires_at"].replace("Z", "+00:00"))
    assert timedelta(minutes=119) < expires - datetime.now(UTC) <= timedelta(hours=2)
    listed = run_canon("token", "list", cwd=tmp_path)
    assert listed.stdout.split("\t")[4].strip() == entries(tmp_path / TOKEN_FILE)[0]["expires_at"]


def test_an_expired_token_is_refused_like_a_revoked_one(tmp_path: Path) -> None:
    tokens = TokenFile(tmp_path / TOKEN_FILE)
    token = tokens.create("brief", "writer", expires_in=timedelta(hours=1))
    assert tokens.verify(token) is not None
    document = json.loads((tmp_path / TOKEN_FILE).read_text(encoding="utf-8"))
    document["tokens"][0]["expires_at"] = "2000-01-01T00:00:00Z"  # its hour passed
    (tmp_path / TOKEN_FILE).write_text(json.dumps(document), encoding="utf-8")

    assert tokens.verify(token) is None


@pytest.mark.parametrize("duration", ["0d", "90", "1w", "-3h", "h"])
def test_create_refuses_an_expiry_that_is_not_a_positive_duration(tmp_path: Path, duration: str) -> None:
    done = run_canon("token", "create", "temp", "--role", "reader", "--expires-in", duration, cwd=tmp_path)

    assert done.returncode == EXIT_USAGE
    assert "--expires-in" in done.stderr
    assert not (tmp_path / TOKEN_FILE).exists()


def test_a_token_without_expiry_keeps_its_file_entry_as_before(tmp_path: Path) -> None:
    make(tmp_path, "rita", "reader")

    assert set(entries(tmp_path / TOKEN_FILE)[0]) == {"name", "role", "groups", "sha256", "created_at"}


# -- canon token list -----------------------------------------------------------------------------------------------
def test_list_shows_names_roles_and_groups_but_never_hashes_or_tokens(tmp_path: Path) -> None:
    tokens = {
        "rita": make(tmp_path, "rita", "reader"),
        "pat": make(tmp_path, "pat", "reader", "payments", "ml"),
        "wendy": make(tmp_path, "wendy", "writer"),
        "alice": make(tmp_path, "alice", "admin", "security"),
    }

    done = run_canon("token", "list", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert [row[:3] for row in rows] == [
        ["rita", "reader", "-"],
        ["pat", "reader", "ml,payments"],
        ["wendy", "writer", "-"],
        ["alice", "admin", "security"],
    ]
    for row in rows:  # the fourth column is when it was made, the fifth when it expires: never
        assert len(row) == 5
        datetime.fromisoformat(row[3].replace("Z", "+00:00"))
        assert row[4] == "-"
    output = done.stdout + done.stderr
    for token in tokens.values():
        assert token not in output
        assert token.removeprefix(TOKEN_PREFIX) not in output
        assert hashlib.sha256(token.encode()).hexdigest() not in output
        assert hashlib.sha256(token.encode()).hexdigest()[:16] not in output


def test_list_without_a_token_file_lists_nothing(tmp_path: Path) -> None:
    done = run_canon("token", "list", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_a_damaged_token_file_is_a_configuration_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / TOKEN_FILE).write_text('{"format": 1, "tokens": [{"name": "x"}]}', encoding="utf-8")

    done = run_canon("token", "list", cwd=tmp_path)

    assert done.returncode == EXIT_USAGE
    assert TOKEN_FILE in done.stderr
    assert "Traceback" not in done.stderr


# -- canon token revoke ---------------------------------------------------------------------------------------------
def test_revoke_removes_only_that_token(tmp_path: Path) -> None:
    rita = make(tmp_path, "rita", "reader")
    wendy = make(tmp_path, "wendy", "writer")

    done = run_canon("token", "revoke", "rita", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "rita" in done.stderr
    tokens = TokenFile(tmp_path / TOKEN_FILE)
    assert tokens.verify(rita) is None
    assert tokens.verify(wendy) == Principal("wendy", frozenset({"writer"}))
    assert [e["name"] for e in entries(tmp_path / TOKEN_FILE)] == ["wendy"]


@pytest.mark.parametrize("existing", [True, False], ids=["file-exists", "no-file"])
def test_revoking_an_unknown_name_exits_1_naming_it(tmp_path: Path, existing: bool) -> None:
    if existing:
        make(tmp_path, "rita", "reader")
    before = (tmp_path / TOKEN_FILE).read_bytes() if existing else None

    done = run_canon("token", "revoke", "nobody", cwd=tmp_path)

    assert done.returncode == EXIT_PROBLEMS
    assert "'nobody'" in done.stderr
    assert done.stdout == ""
    assert ((tmp_path / TOKEN_FILE).read_bytes() if existing else None) == before
    assert (tmp_path / TOKEN_FILE).exists() is existing


def test_revoking_twice_fails_the_second_time(tmp_path: Path) -> None:
    make(tmp_path, "rita", "reader")

    first = run_canon("token", "revoke", "rita", cwd=tmp_path)
    second = run_canon("token", "revoke", "rita", cwd=tmp_path)

    assert (first.returncode, second.returncode) == (0, EXIT_PROBLEMS)
    assert "'rita'" in second.stderr


def test_a_name_revoked_and_created_again_gets_a_new_token_and_the_old_one_stays_dead(tmp_path: Path) -> None:
    old = make(tmp_path, "rita", "reader")
    assert run_canon("token", "revoke", "rita", cwd=tmp_path).returncode == 0

    new = create(tmp_path, "rita", "writer")

    tokens = TokenFile(tmp_path / TOKEN_FILE)
    assert new != old
    assert tokens.verify(old) is None
    assert tokens.verify(new) == Principal("rita", frozenset({"writer"}))


# -- canon audit ----------------------------------------------------------------------------------------------------
RITA = Principal("rita", frozenset({"reader"}))
PAT = Principal("pat", frozenset({"reader"}), frozenset({"payments"}))
ALICE = Principal("alice", frozenset({"admin"}))

# (principal, surface, tool, arguments, outcome): made in this order, so the log holds them newest last
CALLS: list[tuple[Principal, str, str, dict[str, Any], str]] = [
    (RITA, "mcp-http", "get_node", {"id": "team-payments"}, "ok"),
    (RITA, "mcp-http", "get_node", {"id": "svc-card-vault"}, "forbidden"),
    (PAT, "mcp-http", "get_node", {"id": "svc-card-vault"}, "ok"),
    (ANONYMOUS, "mcp-http", "upsert_node", {"id": "x", "type": "Team", "properties": {}}, "forbidden"),
    (PAT, "mcp-stdio", "find_nodes", {"limit": "ten"}, "invalid"),
    (ALICE, "mcp-stdio", "get_node", {"id": "team-nowhere"}, "not_found"),
    (ALICE, "mcp-http", "get_audit_log", {"limit": 5}, "ok"),
    (RITA, "mcp-stdio", "find_nodes", {"type": "Team", "limit": 3}, "ok"),
]


FIRST_SESSION = 4  # CALLS[:4] are made in one session, the rest (and a rejected request) in a later one


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding `canon.db`, whose audit log holds CALLS then one rejected request, and nothing else.

    They are made in two sessions (open, call, close), as two server runs would make them: the second session's
    records are all later than the first's (opening a store and building its index takes far longer than 1 ms).
    """
    folder = tmp_path_factory.mktemp("audited")
    for calls, reject in ((CALLS[:FIRST_SESSION], False), (CALLS[FIRST_SESSION:], True)):
        instance = open_instance(Config(store=folder / "canon.db"))
        try:
            dispatcher = instance.dispatcher
            for principal, surface, tool, arguments, outcome in calls:
                result = dispatcher.call_tool(principal, surface, tool, arguments)
                assert (result.error.code if result.error else "ok") in (outcome, f"{outcome}_arguments")
            if reject:
                dispatcher.rejected("mcp-http", "/mcp", "invalid token")
        finally:
            instance.close()  # flushes the audit log
    return folder


def audit(folder: Path, *options: str) -> list[dict[str, Any]]:
    """`canon audit --json OPTIONS`: the records it printed, in order."""
    done = run_canon("--store", "canon.db", "audit", "--json", *options, cwd=folder)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def summary(record: dict[str, Any]) -> Summary:
    return record["principal"], record["surface"], record["action"], record["target"], record["outcome"]


EXPECTED = [(p.name, s, "tools/call", tool, outcome) for p, s, tool, _, outcome in CALLS] + [
    ("(invalid token)", "mcp-http", "request", "/mcp", "rejected")
]


def test_audit_json_lists_every_record_newest_first(audited: Path) -> None:
    records = audit(audited)

    assert [summary(r) for r in records] == EXPECTED[::-1]
    ids = [r["id"] for r in records]
    assert ids == sorted(ids, reverse=True)
    assert len(set(ids)) == len(ids)
    assert [r["at"] for r in records] == sorted((r["at"] for r in records), reverse=True)
    for record in records:
        assert set(record) == {"id", "at", "principal", "surface", "action", "target", "arguments_digest",
                               "outcome", "revision", "duration_ms"}  # fmt: skip
        assert record["outcome"] in OUTCOMES
        assert len(record["arguments_digest"]) == 16
        assert record["duration_ms"] >= 0
        assert record["revision"] > 0


def test_audit_records_a_digest_of_the_arguments_never_their_values(audited: Path) -> None:
    records = audit(audited)

    by_target = {r["target"]: r for r in records if r["principal"] == "anonymous"}
    digest = hashlib.sha256(json.dumps(CALLS[3][3], sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert by_target["upsert_node"]["arguments_digest"] == digest[:16]
    text = "\n".join(json.dumps(r) for r in records)
    assert "svc-card-vault" not in text
    assert "team-nowhere" not in text


Summary = tuple[str, str, str, str, str]
AUDIT_FILTERS: list[tuple[list[str], Callable[[Summary], bool]]] = [
    (["--principal", "rita"], lambda e: e[0] == "rita"),
    (["--principal", "anonymous"], lambda e: e[0] == "anonymous"),
    (["--principal", "nobody"], lambda e: False),
    (["--outcome", "forbidden"], lambda e: e[4] == "forbidden"),
    (["--outcome", "rejected"], lambda e: e[4] == "rejected"),
    (["--outcome", "conflict"], lambda e: False),
    (["--target", "get_node"], lambda e: e[3] == "get_node"),
    (["--target", "/mcp"], lambda e: e[3] == "/mcp"),
    (["--surface", "mcp-stdio"], lambda e: e[1] == "mcp-stdio"),
    (["--surface", "mcp-http", "--principal", "pat"], lambda e: e[1] == "mcp-http" and e[0] == "pat"),
    (["--principal", "rita", "--target", "get_node", "--outcome", "ok"],
     lambda e: e[0] == "rita" and e[3] == "get_node" and e[4] == "ok"),
]  # fmt: skip


@pytest.mark.parametrize(("options", "keep"), AUDIT_FILTERS, ids=[" ".join(o) for o, _ in AUDIT_FILTERS])
def test_audit_filters_select_exactly_the_matching_records(
    audited: Path, options: list[str], keep: Callable[[Summary], bool]
) -> None:
    expected = [e for e in EXPECTED[::-1] if keep(e)]

    assert [summary(r) for r in audit(audited, *options)] == expected


def test_audit_limit_gives_the_newest_records_and_says_how_many_match(audited: Path) -> None:
    done = run_canon("--store", "canon.db", "audit", "--limit", "3", "--principal", "rita", cwd=audited)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3
    rita = [e for e in EXPECTED[::-1] if e[0] == "rita"]
    for line, (principal, surface, action, target, outcome) in zip(lines, rita, strict=False):
        assert line.split()[1:6] == [principal, surface, action, target, outcome]
    assert f"3 of {len(rita)} matching record(s)" in done.stderr
    assert [summary(r) for r in audit(audited, "--limit", "2")] == EXPECTED[::-1][:2]


def test_audit_as_a_table_has_one_line_per_record(audited: Path) -> None:
    done = run_canon("--store", "canon.db", "audit", cwd=audited)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(EXPECTED)
    assert lines[0].split()[1:7] == ["(invalid", "token)", "mcp-http", "request", "/mcp", "rejected"]
    assert lines[1].split()[1:6] == list(EXPECTED[-2])
    assert all(line.split()[-1] == "ms" for line in lines)
    assert f"{len(EXPECTED)} of {len(EXPECTED)} matching record(s)" in done.stderr


def test_audit_since_keeps_the_records_at_or_after_a_time_in_any_offset(audited: Path) -> None:
    records = audit(audited)
    second_session = len(CALLS) - FIRST_SESSION + 1
    cut = records[second_session - 1]["at"]  # the first record of the second session, e.g. 2026-11-30T11:42:29.646Z
    moment = datetime.fromisoformat(cut.replace("Z", "+00:00"))
    spellings = [
        cut,
        moment.astimezone(timezone(timedelta(hours=2))).isoformat(timespec="milliseconds"),
        moment.astimezone(timezone(timedelta(hours=-5, minutes=-30))).isoformat(timespec="milliseconds"),
        cut.removesuffix("Z"),  # no offset: UTC
    ]

    for since in spellings:
        assert audit(audited, "--since", since) == records[:second_session], since
    assert audit(audited, "--since", records[-1]["at"]) == records
    assert audit(audited, "--since", (moment + timedelta(days=1)).isoformat()) == []


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--since", "yesterday"], "'yesterday'"),
        (["--since", "2026-13-01"], "'2026-13-01'"),
        (["--limit", "0"], "--limit"),
        (["--limit", "-3"], "--limit"),
        (["--limit", "many"], "--limit"),
        (["--outcome", "fine"], "--outcome"),
    ],
    ids=["since-words", "since-month-13", "limit-0", "limit-negative", "limit-text", "outcome-unknown"],
)
def test_audit_rejects_bad_options_as_usage_errors_naming_them(audited: Path, options: list[str], named: str) -> None:
    done = run_canon("--store", "canon.db", "audit", *options, cwd=audited)

    assert done.returncode == EXIT_USAGE
    assert done.stdout == ""
    assert named in done.stderr
    assert "Traceback" not in done.stderr


def test_audit_option_errors_are_found_before_any_store_is_opened(tmp_path: Path) -> None:
    done = run_canon("--store", "canon.db", "audit", "--since", "soon", cwd=tmp_path)

    assert done.returncode == EXIT_USAGE
    assert list(tmp_path.iterdir()) == []  # no store was created (nor seeded) for a command line that is wrong


# -- canon store backup / compact -------------------------------------------------------------------------------------
def test_a_restored_backup_exports_exactly_what_the_store_held_when_it_was_taken(tmp_path: Path) -> None:
    assert run_canon("init", cwd=tmp_path).returncode == 0
    backed = run_canon("store", "backup", "backup.db", cwd=tmp_path)
    assert backed.returncode == 0, backed.stderr
    before = run_canon("export", "-", cwd=tmp_path).stdout
    restored = tmp_path / "restored"
    restored.mkdir()
    (restored / "canon.db").write_bytes((tmp_path / "backup.db").read_bytes())  # the documented restore: a copy
    after = run_canon("export", "-", cwd=restored)
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout) == json.loads(before)
    again = run_canon("store", "backup", "backup.db", cwd=tmp_path)
    assert again.returncode == 3  # never over an existing file
    assert "backup.db" in again.stderr


def test_compact_reports_what_it_removed_and_the_oldest_revision_kept(tmp_path: Path) -> None:
    assert run_canon("init", cwd=tmp_path).returncode == 0
    (tmp_path / "canon.toml").write_text("[retention]\nchanges_keep_revisions = 2\n")
    done = run_canon("store", "compact", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "the change log starts at revision" in done.stdout
    assert run_canon("store", "compact", "--keep-revisions", "0", cwd=tmp_path).returncode == EXIT_USAGE
