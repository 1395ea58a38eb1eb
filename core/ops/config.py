"""Configuration: `canon.toml`, environment overrides, and defaults that need nothing.

Precedence, highest first: command-line options, environment (`CANON_STORE`, `CANON_MODEL`, `CANON_HOST`, `CANON_PORT`,
`CANON_TOKENS`, `CANON_UI_ASSETS`, `CANON_MCP_FASTPATH`, `CANON_METRICS`, `CANON_TRACING`, `CANON_CACHE`,
`CANON_WALK_WORKERS`, and the
network settings `CANON_ALLOWED_HOSTS`, `CANON_ALLOWED_ORIGINS`, `CANON_PUBLIC_URL`, `CANON_ROOT_PATH`,
`CANON_TRUSTED_PROXIES`), the configuration file, defaults. The file is the one named by `--config`, else by
`CANON_CONFIG`, else `canon.toml` in the working directory if there is one. Its keys are checked against
`schema/config/config.schema.json`: an unknown or mistyped key is an error naming the key, never ignored; the network
settings are then checked for sense (`_check_network`: an absolute http(s) `public_url`, a `root_path` starting with
`/`, proxies that are addresses or networks), each error naming the setting and where it was set.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from core.values.dialect import schema_validator
from core.values.documents import pointer
from core.values.errors import ConfigError
from core.values.principal import Principal, Reviewers, ReviewPolicy

__all__ = [
    "DEFAULT_SCOPES",
    "Config",
    "OAuthSettings",
    "cache_folder",
    "effective_settings",
    "load_config",
    "store_location",
    "without_password",
]

DEFAULT_FILE = "canon.toml"


DEFAULT_SCOPES: Mapping[str, str] = {"canon:read": "reader", "canon:write": "writer", "canon:admin": "admin"}
"""The scopes an access token is granted canon's roles by, unless `[oauth.roles]` says otherwise."""


@dataclass(frozen=True)
class OAuthSettings:
    """`[oauth]`: canon as an OAuth 2.1 resource server accepting the JWT access tokens of one issuer."""

    issuer: str  # the `iss` of its tokens; also where its discovery document is, unless jwks_url is given
    resource: str = ""  # canon's resource URL (RFC 8707/9728), the `aud` its tokens carry unless audience says
    # otherwise; "" in the file means `[server] public_url` + "/mcp" (`load_config` fills it in)
    jwks_url: str | None = None
    audience: str | None = None
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    leeway_s: int = 30
    name_claim: str = "sub"
    roles_claim: str | None = None
    groups_claim: str | None = "groups"
    roles: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_SCOPES))  # scope or claim value -> role
    jwks_cache_s: int = 3600
    jwks_min_refresh_s: int = 30
    fetch_timeout_s: float = 10.0  # one fetch of the keys (discovery documents and JWK Set together), at most
    name_prefix: str = "oauth."  # what the issuer's principal names start with, apart from canon's token names
    # a browser's sign-in (core.http.signin): on when client_id is set; the client is confidential (a secret)
    client_id: str | None = None
    client_secret: str | None = None  # shown as "***" by `canon config`; or read from client_secret_file
    client_secret_file: Path | None = None
    redirect_path: str = "/signin/callback"  # the redirect URI's path, after public_url (or the request's base)
    scopes: tuple[str, ...] | None = None  # asked for at sign-in; None: "openid" and the keys of `roles`
    session_max_age_s: int = 8 * 3600  # a session lasts this long at most, and never past its ID token's exp

    @property
    def expected_audience(self) -> str:
        return self.audience or self.resource

    @property
    def signs_in(self) -> bool:
        """Whether browsers sign in with the issuer (a client is configured)."""
        return self.client_id is not None

    @property
    def sign_in_scopes(self) -> tuple[str, ...]:
        return self.scopes if self.scopes is not None else ("openid", *(s for s in self.roles if s != "openid"))


@dataclass(frozen=True)
class Config:
    store: Path | str = Path("canon.db")  # a SQLite file, or a PostgreSQL database's URL (`store_location`)
    model: Path | None = None  # None: the embedded default model
    seed: bool = True
    follow_model: bool = False  # development: `canon serve` adopts a changed model file if the change is compatible
    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = 1024 * 1024
    max_streams: int = 10_000  # open change streams per process, of each kind (listen, 2025-11-25 GET)
    stream_backlog: int = 1_024  # events waiting for a client that stopped reading, before its stream is ended
    mcp_fastpath: bool = True  # canon answers parts of the MCP SDK's HTTP transport itself (core.mcp.fastpath)
    allowed_hosts: tuple[str, ...] = ()  # Host names served besides the local ones (core.http.admission)
    allowed_origins: tuple[str, ...] = ()  # web origins admitted (and answered CORS) besides the local ones
    public_url: str | None = None  # where clients reach canon, prefix included: the base of links (no final "/")
    root_path: str = ""  # the path prefix requests arrive under ("" or "/kb": no final "/")
    trusted_proxies: tuple[str, ...] = ()  # peers whose X-Forwarded-* headers are believed (addresses, networks)
    walk_workers: int | None = (
        None  # walk worker processes (core.dispatch.walkers); None: one per core but one; 0: none
    )
    ui_assets: Path | None = None  # other browser assets for /docs and /graphql at /ui-assets/ (None: canon's own)
    tokens: Path = Path("canon-tokens.json")  # hashed bearer tokens (canon token create/revoke)
    cache: Path | None = None  # what canon remembers between starts (core.lang.schema_checks); None: nothing
    anonymous: bool = True  # HTTP callers without a token may read public nodes
    oauth: OAuthSettings | None = None  # JWT access tokens of an OAuth issuer, besides canon's own tokens
    local_name: str = "local"  # the stdio principal
    local_role: str = "writer"  # an agent over stdio writes; admin (apply_model, the audit log) is a decision
    local_groups: tuple[str, ...] = ()
    reviewer_roles: tuple[str, ...] = ("admin",)  # who may approve or reject proposals (core.dispatch.proposals) ...
    reviewer_groups: tuple[str, ...] = ("reviewers",)  # ... by role or by group; never a proposal's author
    review_types: tuple[str, ...] = ()  # node and edge types whose writes wait for review (core.dispatch.review) ...
    direct_roles: tuple[str, ...] = ("admin",)  # ... except by these roles ...
    direct_groups: tuple[str, ...] = ()  # ... and these groups, who write them directly
    metrics: bool = True  # Prometheus metrics at /metrics (core.ops.metrics)
    metrics_protected: bool = False  # /metrics answers only a bearer token with the admin role
    tracing: bool = False  # one OpenTelemetry span per dispatched call (core.ops.tracing)
    log_format: str = "text"  # "text" or "json" (core.ops.logs)
    access_log: bool = False  # one log line per HTTP request (core.http.access)
    audit_days: int | None = None  # `canon store compact` drops audit records older than this (None: keep all)
    changes_keep_revisions: int | None = None  # ... keeps this many newest revisions of the change log
    changes_days: int | None = None  # ... and drops changes older than this (None: no bound of that kind)
    source: Path | None = None  # the file it was read from, if any
    origins: Mapping[str, str] = field(default_factory=dict[str, str])  # setting -> where its value came from

    def local_principal(self) -> Principal:
        """Who a stdio client is: the configured local principal (never what the client says it is)."""
        return Principal(self.local_name, frozenset({self.local_role}), frozenset(self.local_groups))

    def reviewers(self) -> Reviewers:
        """Who may review proposals (`[proposals]`)."""
        return Reviewers(frozenset(self.reviewer_roles), frozenset(self.reviewer_groups))

    def review_policy(self) -> ReviewPolicy:
        """Which writes wait for review (`[proposals]`), besides the types the model marks."""
        return ReviewPolicy(frozenset(self.review_types), frozenset(self.direct_roles), frozenset(self.direct_groups))


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
FILE_SCHEME = "file"
"""The scheme of a store location that names none: a path."""


def scheme_of(location: str | Path) -> str:
    """The URL scheme of a store location (`postgresql://...`), lower-cased; `file` for a path. The store backend of
    each scheme is an entry point of `canon.stores` (`core.store.backend_for`)."""
    match = _SCHEME.match(location) if isinstance(location, str) else None
    return FILE_SCHEME if match is None else match.group(1).lower()


def store_location(value: str, base: Path | None = None) -> Path | str:
    """Where a store is: a URL (a scheme and `://`) as it is, else a file path (relative to `base`, if given)."""
    if scheme_of(value) != FILE_SCHEME:
        return value
    return base / value if base is not None else Path(value)


def without_password(url: str) -> str:
    """A store's URL without its password (`***` in its place), fit for messages, `location` and `canon config`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _schema() -> dict[str, Any]:
    text = resources.files("schema").joinpath("config", "config.schema.json").read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Build the effective configuration; raise `ConfigError` naming the file, key and problem."""
    env = os.environ if env is None else env
    file = path or (Path(env["CANON_CONFIG"]) if env.get("CANON_CONFIG") else None)
    if file is None and Path(DEFAULT_FILE).is_file():
        file = Path(DEFAULT_FILE)
    config = _from_file(file) if file is not None else Config()
    return _check_network(_apply_env(config, env))


def _from_file(file: Path) -> Config:
    name = str(file)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"The configuration file {name} does not exist.", source=name) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read the configuration file {name}: {exc}.", source=name) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{name} is not valid TOML: {exc}.", source=name) from exc
    errors = sorted(schema_validator(_schema()).iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        key = ".".join(str(p) for p in first.absolute_path) or None
        where = f" at {key}" if key else ""
        raise ConfigError(f"{name}{where}: {first.message}.", source=name, key=key or pointer(first.absolute_path))
    base = file.parent
    origins: dict[str, str] = {}
    values: dict[str, Any] = {"source": file}
    for section, key, attr in _KEYS:
        if key in data.get(section, {}):
            value = data[section][key]
            if attr == "store":
                values[attr] = store_location(value, base)
            else:
                values[attr] = (base / value) if attr in _PATHS else tuple(value) if isinstance(value, list) else value
            origins[attr] = f"{name} [{section}] {key}"
    if "oauth" in data:
        values["oauth"] = _oauth(data["oauth"], file)
        origins["oauth"] = f"{name} [oauth]"
        origins.update({f"oauth.{key}": f"{name} [oauth] {key}" for key in data["oauth"]})
        if "client_secret_file" in data["oauth"]:
            origins["oauth.client_secret"] = f"{name} [oauth] client_secret_file"
    return replace(Config(), **values, origins=origins)


def _oauth(section: Mapping[str, Any], file: Path) -> OAuthSettings:
    """`[oauth]`, checked by the schema already (issuer present, algorithms asymmetric, a client_secret or a
    client_secret_file with client_id, never both); the secret file is read here, relative to `file`."""
    values: dict[str, Any] = dict(section)
    for key in ("algorithms", "scopes"):
        if key in values:
            values[key] = tuple(values[key])
    if "roles" in values:
        values["roles"] = dict(values["roles"])
    if "client_secret_file" in values:
        secret_file = values["client_secret_file"] = file.parent / values["client_secret_file"]
        where = f"{file} [oauth] client_secret_file"
        try:
            values["client_secret"] = secret_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{where}: cannot read {secret_file}: {exc}.", source=where,
                              key="oauth.client_secret_file") from exc  # fmt: skip
        if not values["client_secret"]:
            raise ConfigError(f"{where}: {secret_file} is empty.", source=where, key="oauth.client_secret_file")
    return OAuthSettings(**values)


_KEYS = [
    ("store", "path", "store"),
    ("store", "url", "store"),
    ("model", "path", "model"),
    ("model", "seed", "seed"),
    ("model", "follow", "follow_model"),
    ("server", "host", "host"),
    ("server", "port", "port"),
    ("server", "max_body_bytes", "max_body_bytes"),
    ("server", "max_streams", "max_streams"),
    ("server", "stream_backlog", "stream_backlog"),
    ("server", "mcp_fastpath", "mcp_fastpath"),
    ("server", "walk_workers", "walk_workers"),
    ("server", "ui_assets", "ui_assets"),
    ("server", "allowed_hosts", "allowed_hosts"),
    ("server", "allowed_origins", "allowed_origins"),
    ("server", "public_url", "public_url"),
    ("server", "root_path", "root_path"),
    ("server", "trusted_proxies", "trusted_proxies"),
    ("metrics", "enabled", "metrics"),
    ("metrics", "protected", "metrics_protected"),
    ("tracing", "enabled", "tracing"),
    ("logging", "format", "log_format"),
    ("logging", "access_log", "access_log"),
    ("auth", "tokens", "tokens"),
    ("auth", "anonymous", "anonymous"),
    ("local", "name", "local_name"),
    ("local", "role", "local_role"),
    ("local", "groups", "local_groups"),
    ("proposals", "reviewer_roles", "reviewer_roles"),
    ("proposals", "reviewer_groups", "reviewer_groups"),
    ("proposals", "review_types", "review_types"),
    ("proposals", "direct_roles", "direct_roles"),
    ("proposals", "direct_groups", "direct_groups"),
    ("retention", "audit_days", "audit_days"),
    ("retention", "changes_keep_revisions", "changes_keep_revisions"),
    ("retention", "changes_days", "changes_days"),
]
_PATHS = ("store", "model", "tokens", "ui_assets")


def _apply_env(config: Config, env: Mapping[str, str]) -> Config:
    values: dict[str, Any] = {}
    origins = dict(config.origins)
    for var, attr in (("CANON_STORE", "store"), ("CANON_MODEL", "model"), ("CANON_HOST", "host"),
                      ("CANON_TOKENS", "tokens"), ("CANON_UI_ASSETS", "ui_assets")):  # fmt: skip
        if env.get(var):
            if attr == "store":
                values[attr] = store_location(env[var])
            else:
                values[attr] = Path(env[var]) if attr in _PATHS else env[var]
            origins[attr] = f"${var}"
    for var, attr, most, what in _INT_VARS:
        if env.get(var):
            raw = env[var]
            if not (raw.isascii() and raw.isdigit()) or not 0 <= int(raw) <= most:
                raise ConfigError(f"{var}={raw!r} is not {what}.", source=f"${var}", key=var)
            values[attr] = int(raw)
            origins[attr] = f"${var}"
    values["cache"] = cache_folder(env)
    if env.get("CANON_CACHE"):
        origins["cache"] = "$CANON_CACHE"
    for var, attr in _LIST_VARS:
        if env.get(var):
            values[attr] = tuple(item.strip() for item in env[var].split(",") if item.strip())
            origins[attr] = f"${var}"
    for var, attr in (("CANON_PUBLIC_URL", "public_url"), ("CANON_ROOT_PATH", "root_path")):
        if var in env:
            values[attr] = env[var]
            origins[attr] = f"${var}"
    for var, attr in (("CANON_MCP_FASTPATH", "mcp_fastpath"), ("CANON_METRICS", "metrics"),
                      ("CANON_TRACING", "tracing")):  # fmt: skip
        if env.get(var):
            values[attr] = _switch(var, env[var])
            origins[attr] = f"${var}"
    return replace(config, **values, origins=origins)


_INT_VARS = (("CANON_PORT", "port", 65535, "a port number (0-65535)"),
             ("CANON_WALK_WORKERS", "walk_workers", 64, "a number of processes (0-64)"))  # fmt: skip
_LIST_VARS = (("CANON_ALLOWED_HOSTS", "allowed_hosts"), ("CANON_ALLOWED_ORIGINS", "allowed_origins"),
              ("CANON_TRUSTED_PROXIES", "trusted_proxies"))  # fmt: skip


def _check_network(config: Config) -> Config:
    """The network settings made canonical (no final `/` on `public_url` and `root_path`), or a `ConfigError`
    naming the bad one and where it was set; `[oauth] resource` defaults to `public_url` + `/mcp`."""
    public_url = None if config.public_url is None else config.public_url.rstrip("/")
    if public_url is not None:
        parts = urlsplit(public_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise _bad(config, "public_url", config.public_url,
                       "is not an absolute http(s) URL (https://host[:port][/path])")  # fmt: skip
    if config.root_path and not config.root_path.startswith("/"):
        raise _bad(config, "root_path", config.root_path, "does not start with '/' (a path prefix such as /kb)")
    _check_lists(config)
    oauth = config.oauth
    if oauth is not None and not oauth.resource:
        if public_url is None:
            raise ConfigError("[oauth] needs resource (canon's resource URL), or [server] public_url to derive it.",
                              source=config.origins.get("oauth", "[oauth]"), key="oauth.resource")  # fmt: skip
        oauth = replace(oauth, resource=f"{public_url}/mcp")
        where = config.origins.get("public_url", "[server] public_url")
        config = replace(config, origins={**config.origins, "oauth.resource": f"{where} + /mcp"})
    return replace(config, public_url=public_url, root_path=config.root_path.rstrip("/"), oauth=oauth)


def _check_lists(config: Config) -> None:
    for host in config.allowed_hosts:
        if "/" in host or host.startswith(":") or " " in host:
            raise _bad(config, "allowed_hosts", host,
                       "is not a host name (name or name:port, without a scheme or a path)")  # fmt: skip
    for origin in config.allowed_origins:
        if not _is_origin(origin):
            raise _bad(config, "allowed_origins", origin,
                       "is not a web origin (http(s)://host[:port], a port of * for any)")  # fmt: skip
    for proxy in config.trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise _bad(config, "trusted_proxies", proxy,
                       "is not an IP address or network (127.0.0.1, 10.0.0.0/8)") from None  # fmt: skip


def _bad(config: Config, attr: str, value: object, why: str) -> ConfigError:
    """The error for a bad network setting, naming it and where it was set (a file's key, or a variable)."""
    where = config.origins.get(attr, f"[server] {attr}")
    return ConfigError(f"{where}: {value!r} {why}.", source=where, key=attr)


def _is_origin(value: str) -> bool:
    parts = urlsplit(value.removesuffix(":*"))
    bare = parts.path in ("", "/") and not parts.query and not parts.fragment and "@" not in parts.netloc
    try:
        parts.port  # noqa: B018 (a port that is not a number raises)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and bare


_META = ("source", "origins")
"""`Config` fields that say where the settings came from, not settings."""
SECRETS = ("client_secret",)
"""Settings `canon config` shows as `***` when set: a secret is never printed."""
HIDDEN = "***"


def effective_settings(config: Config) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every setting of `config` as JSON values, and where each came from (`Config.origins`, else "default"), in
    two mappings of the same shape: walked from the dataclasses' fields, so a new setting is shown without more
    code. A nested section (`oauth`) is an object of its own settings when set, null (from "default") when not."""
    values: dict[str, Any] = {}
    origins: dict[str, Any] = {}
    for f in fields(config):
        if f.name in _META:
            continue
        value = getattr(config, f.name)
        values[f.name] = without_password(value) if isinstance(value, str) and f.name == "store" else _json_value(value)
        if is_dataclass(value) and not isinstance(value, type):
            origins[f.name] = {g.name: config.origins.get(f"{f.name}.{g.name}", "default") for g in fields(value)}
        else:
            origins[f.name] = config.origins.get(f.name, "default")
    return values, origins


def _json_value(value: object) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: HIDDEN if f.name in SECRETS and getattr(value, f.name) is not None
                else _json_value(getattr(value, f.name)) for f in fields(value)}  # fmt: skip
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_json_value(item) for item in value]  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    return value


def cache_folder(env: Mapping[str, str] | None = None) -> Path | None:
    """`CANON_CACHE`, else `canon` in the user's cache folder (`XDG_CACHE_HOME`, else `~/.cache`), if there is one
    (`env`: the environment, by default this process's)."""
    env = os.environ if env is None else env
    if env.get("CANON_CACHE"):
        return Path(env["CANON_CACHE"])
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "canon"
    if env.get("HOME"):
        return Path(env["HOME"]) / ".cache" / "canon"
    return None


def _switch(var: str, raw: str) -> bool:
    """An on/off environment variable: 1/true/on or 0/false/off, in any case."""
    value = raw.strip().lower()
    if value not in ("1", "true", "on", "0", "false", "off"):
        raise ConfigError(f"{var}={raw!r} is not on or off (1/true/on, 0/false/off).", source=f"${var}", key=var)
    return value in ("1", "true", "on")
