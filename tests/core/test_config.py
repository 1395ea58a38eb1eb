"""Configuration: defaults, canon.toml, environment overrides, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.ops.config import Config, load_config
from core.values.errors import ConfigError
from core.values.principal import Reviewers, ReviewPolicy


@pytest.fixture(autouse=True)
def _empty_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_config looks for ./canon.toml; run every test where there is none unless the test writes one."""
    monkeypatch.chdir(tmp_path)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


FULL = """
[store]
path = "data/store.db"

[model]
path = "models/model.yaml"
seed = false

[server]
host = "0.0.0.0"
port = 9000
max_body_bytes = 2048
max_streams = 50
stream_backlog = 64
mcp_fastpath = false
"""


def test_defaults_need_no_file_and_no_environment() -> None:
    config = load_config(None, env={})

    assert config.store == Path("canon.db")
    assert config.model is None
    assert config.seed is True
    assert config.host == "127.0.0.1"
    assert config.port == 8000
    assert (config.max_streams, config.stream_backlog) == (10_000, 1_024)
    assert config.mcp_fastpath is True
    assert config.source is None
    assert dict(config.origins) == {}


def test_a_config_file_sets_every_value(tmp_path: Path) -> None:
    file = _write(tmp_path / "etc" / "canon.toml", FULL)

    config = load_config(file, env={})

    assert config.source == file
    assert (config.seed, config.host, config.port, config.max_body_bytes) == (False, "0.0.0.0", 9000, 2048)
    assert (config.max_streams, config.stream_backlog) == (50, 64)
    assert config.mcp_fastpath is False


def test_relative_paths_in_a_config_file_resolve_against_its_directory(tmp_path: Path) -> None:
    file = _write(tmp_path / "etc" / "canon.toml", FULL)

    config = load_config(file, env={})

    assert config.store == tmp_path / "etc" / "data" / "store.db"
    assert config.model == tmp_path / "etc" / "models" / "model.yaml"


def test_absolute_paths_in_a_config_file_are_kept(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "x.db"
    file = _write(tmp_path / "etc" / "canon.toml", f'[store]\npath = "{target}"\n')

    assert load_config(file, env={}).store == target


def test_canon_toml_in_the_working_directory_is_read_without_being_named(tmp_path: Path) -> None:
    _write(tmp_path / "canon.toml", "[server]\nport = 9100\n")

    config = load_config(None, env={})

    assert config.port == 9100
    assert config.source == Path("canon.toml")


def test_environment_overrides_the_config_file(tmp_path: Path) -> None:
    file = _write(tmp_path / "canon.toml", FULL)
    env = {"CANON_STORE": "/srv/env.db", "CANON_MODEL": "/srv/env-model.json", "CANON_HOST": "::1",
           "CANON_PORT": "7000"}  # fmt: skip

    config = load_config(file, env=env)

    assert config.store == Path("/srv/env.db")
    assert config.model == Path("/srv/env-model.json")
    assert config.host == "::1"
    assert config.port == 7000
    assert config.seed is False  # not overridden: still from the file


def test_empty_environment_variables_are_ignored(tmp_path: Path) -> None:
    file = _write(tmp_path / "canon.toml", FULL)

    config = load_config(file, env={"CANON_STORE": "", "CANON_PORT": ""})

    assert config.store == tmp_path / "data" / "store.db"
    assert config.port == 9000


def test_canon_config_names_the_config_file(tmp_path: Path) -> None:
    file = _write(tmp_path / "somewhere" / "other.toml", "[server]\nport = 9200\n")
    _write(tmp_path / "canon.toml", "[server]\nport = 9300\n")  # CANON_CONFIG wins over ./canon.toml

    config = load_config(None, env={"CANON_CONFIG": str(file)})

    assert config.source == file
    assert config.port == 9200


def test_an_explicit_path_wins_over_canon_config(tmp_path: Path) -> None:
    named = _write(tmp_path / "named.toml", "[server]\nport = 9400\n")
    other = _write(tmp_path / "other.toml", "[server]\nport = 9500\n")

    assert load_config(named, env={"CANON_CONFIG": str(other)}).port == 9400


def test_an_unknown_key_is_an_error_naming_the_section_and_the_key(tmp_path: Path) -> None:
    file = _write(tmp_path / "canon.toml", '[store]\npth = "x.db"\n')

    with pytest.raises(ConfigError) as raised:
        load_config(file, env={})

    named = f"{raised.value.key} {raised.value}"
    assert "store" in named
    assert "pth" in named
    assert raised.value.source == str(file)


def test_an_unknown_section_is_an_error_naming_it(tmp_path: Path) -> None:
    file = _write(tmp_path / "canon.toml", "[sever]\nport = 80\n")

    with pytest.raises(ConfigError) as raised:
        load_config(file, env={})

    assert "sever" in f"{raised.value.key} {raised.value}"


def test_a_value_of_the_wrong_type_is_an_error_naming_its_dotted_key(tmp_path: Path) -> None:
    file = _write(tmp_path / "canon.toml", '[server]\nport = "eighty"\n')

    with pytest.raises(ConfigError) as raised:
        load_config(file, env={})

    assert raised.value.key == "server.port"


def test_a_port_out_of_range_in_the_file_is_an_error(tmp_path: Path) -> None:
    file = _write(tmp_path / "canon.toml", "[server]\nport = 70000\n")

    with pytest.raises(ConfigError) as raised:
        load_config(file, env={})

    assert raised.value.key == "server.port"


def test_invalid_toml_is_an_error_naming_the_line(tmp_path: Path) -> None:
    file = _write(tmp_path / "canon.toml", '[server]\nhost = "ok"\nport = = 1\n')

    with pytest.raises(ConfigError) as raised:
        load_config(file, env={})

    assert "line 3" in str(raised.value)
    assert raised.value.source == str(file)


def test_a_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path / "nope.toml", env={})

    assert raised.value.source == str(tmp_path / "nope.toml")


def test_canon_config_naming_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_config(None, env={"CANON_CONFIG": str(tmp_path / "nope.toml")})


# "²" passes str.isdigit() but not int(): it must still be a ConfigError, not a crash
@pytest.mark.parametrize("value", ["abc", "-1", "65536", "80.5", "²"])
def test_canon_port_that_is_not_a_port_number_is_an_error(value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(None, env={"CANON_PORT": value})

    assert raised.value.key == "CANON_PORT"


def test_canon_walk_workers_sets_the_walk_worker_processes_over_the_file(tmp_path: Path) -> None:
    file = _write(tmp_path / "canon.toml", "[server]\nwalk_workers = 3\n")
    assert load_config(file, env={}).walk_workers == 3
    config = load_config(file, env={"CANON_WALK_WORKERS": "0"})
    assert config.walk_workers == 0
    assert config.origins["walk_workers"] == "$CANON_WALK_WORKERS"
    with pytest.raises(ConfigError, match="CANON_WALK_WORKERS='two' is not a number of processes") as raised:
        load_config(file, env={"CANON_WALK_WORKERS": "two"})
    assert raised.value.key == "CANON_WALK_WORKERS"


def test_origins_say_where_each_value_came_from(tmp_path: Path) -> None:
    file = _write(tmp_path / "canon.toml", '[store]\npath = "x.db"\n[server]\nport = 9000\n')

    config = load_config(file, env={"CANON_HOST": "0.0.0.0"})

    assert str(file) in config.origins["store"]
    assert str(file) in config.origins["port"]
    assert config.origins["host"] == "$CANON_HOST"
    assert "model" not in config.origins  # a default
    assert "max_body_bytes" not in config.origins


def test_an_environment_override_replaces_the_file_as_origin(tmp_path: Path) -> None:
    file = _write(tmp_path / "canon.toml", "[server]\nport = 9000\n")

    config = load_config(file, env={"CANON_PORT": "9001"})

    assert config.origins["port"] == "$CANON_PORT"


def test_config_is_a_frozen_value() -> None:
    config = load_config(None, env={})

    assert isinstance(config, Config)
    with pytest.raises(AttributeError):
        config.port = 1  # type: ignore[misc]


def test_a_stream_bound_below_one_is_an_error_naming_its_key(tmp_path: Path) -> None:
    file = _write(tmp_path / "canon.toml", "[server]\nmax_streams = 0\n")

    with pytest.raises(ConfigError) as caught:
        load_config(file, env={})

    assert "server.max_streams" in str(caught.value)
    assert caught.value.key == "server.max_streams"


@pytest.mark.parametrize(("value", "on"), [("0", False), ("off", False), ("FALSE", False), ("1", True), ("on", True)])
def test_canon_mcp_fastpath_switches_the_fast_path(tmp_path: Path, value: str, on: bool) -> None:
    file = _write(tmp_path / "canon.toml", f"[server]\nmcp_fastpath = {'false' if on else 'true'}\n")  # overridden

    config = load_config(file, env={"CANON_MCP_FASTPATH": value})

    assert config.mcp_fastpath is on
    assert config.origins["mcp_fastpath"] == "$CANON_MCP_FASTPATH"


def test_a_canon_mcp_fastpath_that_is_neither_on_nor_off_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(None, env={"CANON_MCP_FASTPATH": "maybe"})

    assert raised.value.key == "CANON_MCP_FASTPATH"


OAUTH = """
[oauth]
issuer = "https://login.example.com/realms/acme"
resource = "https://canon.example.com"
algorithms = ["RS256", "PS256"]
leeway_s = 10
roles_claim = "roles"
groups_claim = "teams"

[oauth.roles]
"canon-readers" = "reader"
"canon-editors" = "writer"
"""


def test_an_oauth_section_configures_the_issuer_its_claims_and_role_mapping(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path / "canon.toml", OAUTH), env={})

    oauth = config.oauth
    assert oauth is not None
    assert (oauth.issuer, oauth.resource, oauth.expected_audience) == (
        "https://login.example.com/realms/acme", "https://canon.example.com", "https://canon.example.com")  # fmt: skip
    assert oauth.algorithms == ("RS256", "PS256")
    assert (oauth.leeway_s, oauth.roles_claim, oauth.groups_claim, oauth.name_claim) == (10, "roles", "teams", "sub")
    assert dict(oauth.roles) == {"canon-readers": "reader", "canon-editors": "writer"}


def test_without_an_oauth_section_only_canons_own_tokens_are_accepted() -> None:
    assert load_config(None, env={}).oauth is None


@pytest.mark.parametrize(("text", "key"), [
    ('[oauth]\nresource = "https://canon.example.com"\n', "oauth"),  # no issuer
    (OAUTH.replace('["RS256", "PS256"]', '["HS256"]'), "oauth.algorithms.0"),  # symmetric: never
    (OAUTH.replace('["RS256", "PS256"]', '["none"]'), "oauth.algorithms.0"),
    (OAUTH.replace('"canon-editors" = "writer"', '"canon-editors" = "owner"'), "oauth.roles.canon-editors"),
    (OAUTH.replace('resource = "https://canon.example.com"', 'resource = "canon.example.com"'), "oauth.resource"),
])  # fmt: skip
def test_an_oauth_setting_that_could_not_be_safe_is_an_error_naming_its_key(tmp_path: Path, text: str,
                                                                           key: str) -> None:  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        load_config(_write(tmp_path / "canon.toml", text), env={})

    assert raised.value.key == key


def test_the_proposals_section_names_who_may_review(tmp_path: Path) -> None:
    file = tmp_path / "reviewers.toml"  # not the canon.toml of the test's folder, which load_config(None) reads
    file.write_text('[proposals]\nreviewer_roles = ["writer"]\nreviewer_groups = ["architecture"]\n')
    reviewers = load_config(file, env={}).reviewers()
    assert (reviewers.roles, reviewers.groups) == (frozenset({"writer"}), frozenset({"architecture"}))
    assert load_config(None, env={}).reviewers() == Reviewers()  # the default: admin role, reviewers group
    file.write_text('[proposals]\nreviewer_roles = ["reader"]\n')  # the review tools need the writer role
    with pytest.raises(ConfigError, match="reviewer_roles"):
        load_config(file, env={})


def test_the_proposals_section_names_which_writes_wait_for_review_and_who_writes_them_directly(tmp_path: Path) -> None:
    file = tmp_path / "policy.toml"
    file.write_text(
        '[proposals]\nreview_types = ["Team", "owns"]\ndirect_roles = ["writer"]\ndirect_groups = ["stewards"]\n'
    )
    policy = load_config(file, env={}).review_policy()
    assert policy == ReviewPolicy(frozenset({"Team", "owns"}), frozenset({"writer"}), frozenset({"stewards"}))
    assert load_config(None, env={}).review_policy() == ReviewPolicy()  # nothing reviewed; the admin writes directly
    file.write_text('[proposals]\nreview_types = ["not a type!"]\n')
    with pytest.raises(ConfigError) as raised:
        load_config(file, env={})
    assert raised.value.key == "proposals.review_types.0"


SIGN_IN = '[oauth]\nissuer = "https://login.example.com/acme"\nresource = "https://canon.example.com"\n'


def test_a_client_id_turns_the_sign_in_on_with_the_secret_read_from_its_file(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("  s3cret\n", encoding="utf-8")
    text = SIGN_IN + 'client_id = "canon-web"\nclient_secret_file = "secret"\n'

    oauth = load_config(_write(tmp_path / "canon.toml", text), env={}).oauth

    assert oauth is not None
    assert oauth.signs_in
    assert oauth.client_secret == "s3cret"
    assert oauth.redirect_path == "/signin/callback"
    assert oauth.sign_in_scopes == ("openid", "canon:read", "canon:write", "canon:admin")
    assert oauth.session_max_age_s == 8 * 3600


@pytest.mark.parametrize(("text", "key"), [
    (SIGN_IN + 'client_id = "canon-web"\n', "oauth"),  # no secret: canon is a confidential client
    (SIGN_IN + 'client_id = "c"\nclient_secret = "s"\nclient_secret_file = "f"\n', "oauth"),  # both forms
    (SIGN_IN + 'client_secret = "s"\n', "oauth"),  # a secret without a client
    (SIGN_IN + 'client_id = "c"\nclient_secret = "s"\nredirect_path = "https://evil.example/cb"\n',
     "oauth.redirect_path"),
    (SIGN_IN + 'client_id = "c"\nclient_secret = "s"\nscopes = ["canon:read"]\n', "oauth.scopes"),  # no openid
    (SIGN_IN + 'client_id = "c"\nclient_secret = "s"\nsession_max_age_s = 1\n', "oauth.session_max_age_s"),
    (SIGN_IN + 'client_id = "c"\nclient_secret_file = "missing"\n', "oauth.client_secret_file"),
])  # fmt: skip
def test_a_sign_in_setting_that_cannot_work_is_an_error_naming_its_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(_write(tmp_path / "canon.toml", text), env={})

    assert raised.value.key == key
