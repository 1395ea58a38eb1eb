"""A throwaway PostgreSQL server for the tests, or the one `$CANON_TEST_DATABASE_URL` names.

`Server.start()` finds PostgreSQL's programs (`pg_ctl` on PATH, else Debian's /usr/lib/postgresql/*/bin), makes a
cluster in a temporary directory and starts it on a free 127.0.0.1 port, with its socket in that directory.
PostgreSQL refuses to run as root: as root, the cluster belongs to `nobody` and its programs run as `nobody`.
Durability settings are off (fsync, synchronous commit): the tests check canon, not the disk.

Each test gets a database of its own, made from a template that holds pg_trgm and canon's tables but no model
(`new_database`), so a store opens on it by recording its model only: about 0.1 s each for the copy and the
open on the shared 2-core machine (0.3-0.4 s for the open when it created the tables). Anything that goes wrong
raises: the PostgreSQL tests are never skipped.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

TEMPLATE = "canon_test_template"
_numbers = itertools.count()


def _bin_dir() -> Path:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True):
        return Path(candidate).parent
    raise RuntimeError(
        "The PostgreSQL tests need PostgreSQL's programs (pg_ctl, initdb, postgres): install PostgreSQL "
        "(Debian: apt-get install postgresql), or set CANON_TEST_DATABASE_URL to a server the tests may create "
        "databases on."
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _with_database(url: str, database: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + database))


@dataclass
class Server:
    """A PostgreSQL server the tests may create databases on; `url` names its maintenance database."""

    url: str
    directory: Path | None = None  # the throwaway cluster's directory (None: a server we did not start)
    run_as: list[str] = field(default_factory=list[str])
    options: str = ""  # the server's own settings (`pg_ctl -o`), for `start_again`
    databases: list[str] = field(default_factory=list[str])

    @classmethod
    def start(cls) -> Server:
        existing = os.environ.get("CANON_TEST_DATABASE_URL")
        server = cls(existing) if existing else cls._start_cluster()
        server._make_template()
        return server

    @classmethod
    def start_own(cls) -> Server:
        """A throwaway server of the caller's own even when `$CANON_TEST_DATABASE_URL` names one: for a test
        that restarts it."""
        server = cls._start_cluster()
        server._make_template()
        return server

    @classmethod
    def _start_cluster(cls) -> Server:
        bin_dir = _bin_dir()
        directory = Path(tempfile.mkdtemp(prefix="canon-pg-"))
        run_as: list[str] = []
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(directory, nobody.pw_uid, nobody.pw_gid)
            run_as = ["runuser", "-u", "nobody", "--"]
        port = _free_port()
        data = directory / "data"
        server = cls(f"postgresql://canon@127.0.0.1:{port}/postgres", directory, run_as)
        server._run(str(bin_dir / "initdb"), "-D", str(data), "-U", "canon", "--auth=trust", "-E", "UTF8",
                    "--no-locale", "--no-sync")  # fmt: skip
        options = (f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")  # fmt: skip
        server.options = options
        server.start_again()
        return server

    def start_again(self) -> None:
        """Start the server (after `stop_for_now`, or the first time) on its port, with its settings."""
        assert self.directory is not None
        self._run(str(_bin_dir() / "pg_ctl"), "-D", str(self.directory / "data"), "-o", self.options, "-l",
                  str(self.directory / "log"), "-w", "-t", "60", "start")  # fmt: skip

    def stop_for_now(self) -> None:
        """Shut the server down (`pg_ctl stop -m fast`), keeping its data, until `start_again`: an outage."""
        if self.directory is None:
            raise RuntimeError("Only a server the tests started can be stopped (see Server.start_own).")
        self._run(str(_bin_dir() / "pg_ctl"), "-D", str(self.directory / "data"), "-m", "fast", "-w", "-t", "60",
                  "stop")  # fmt: skip

    def _run(self, *command: str) -> None:
        assert self.directory is not None
        done = subprocess.run([*self.run_as, *command], cwd=self.directory, capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip
        if done.returncode != 0:
            log = self.directory / "log"
            detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr}{done.stdout}{detail}")

    def _make_template(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
            db.execute(f"CREATE DATABASE {TEMPLATE}")
        with psycopg.connect(_with_database(self.url, TEMPLATE), autocommit=True) as db:
            db.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        from core.lang.model import load_model
        from core.store.postgres import PostgresStore

        PostgresStore.open_empty(_with_database(self.url, TEMPLATE), load_model()).close()  # canon's tables, no model

    def new_database(self, *, synchronous_commit: bool = False, copy_of: str | None = None) -> str:
        """A new empty database (with pg_trgm); its URL. With `synchronous_commit`, a commit returns only once it
        is in the WAL on disk (the server's setting is off), so it survives an immediate restart. With `copy_of`
        (the URL of a database on this server that no one is connected to), a copy of that database instead:
        PostgreSQL copies its files, far faster than writing the same records again."""
        name = f"canon_test_{os.getpid()}_{next(_numbers)}"
        template = TEMPLATE if copy_of is None else urlsplit(copy_of).path.lstrip("/")
        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(f"CREATE DATABASE {name} TEMPLATE {template}")  # pyright: ignore[reportArgumentType, reportCallIssue]
            if synchronous_commit:
                db.execute(f"ALTER DATABASE {name} SET synchronous_commit = on")  # pyright: ignore[reportArgumentType, reportCallIssue]
        self.databases.append(name)
        return _with_database(self.url, name)

    def drop_database(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # pyright: ignore[reportArgumentType, reportCallIssue]

    def restart(self, mode: str = "fast") -> None:
        """Restart the server on the same port, as `pg_ctl restart -m MODE` does: `fast` ends every session and
        shuts down cleanly; `immediate` kills every server process, so the start recovers from the WAL (a
        crash)."""
        if self.directory is None:
            raise RuntimeError("Only a server the tests started can be restarted (see Server.start_own).")
        self._run(str(_bin_dir() / "pg_ctl"), "-D", str(self.directory / "data"), "-l", str(self.directory / "log"),
                  "-m", mode, "-w", "-t", "60", "restart")  # fmt: skip

    def stop(self) -> None:
        if self.directory is None:
            with psycopg.connect(self.url, autocommit=True) as db:
                for name in [*self.databases, TEMPLATE]:
                    db.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # pyright: ignore[reportArgumentType, reportCallIssue]
            return
        try:
            self._run(str(_bin_dir() / "pg_ctl"), "-D", str(self.directory / "data"), "-m", "immediate", "-w",
                      "stop")  # fmt: skip
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)
