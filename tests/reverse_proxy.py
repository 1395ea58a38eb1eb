"""A real nginx in front of a canon server, for tests: started in the foreground from a temporary folder, stopped
at the end.

`Nginx.start(folder, site, upstream_port)` renders the site configuration the deployment guide ships
(docs/operations/examples/nginx.conf: one copy, so the guide cannot drift from what was tested) with a free
127.0.0.1 port to listen on and canon's port to forward to, wraps it in a main configuration whose pid file, logs
and temporary folders are in `folder`, starts `nginx -g 'daemon off;' -p folder -c nginx.conf`, and waits until
the port accepts. `stop()` ends it (SIGQUIT, then SIGKILL). nginx missing is an error naming how to install it:
these tests are never skipped (scripts/test installs nginx when it may).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EXAMPLE", "Nginx", "check_config", "free_port", "render_site", "write_config"]

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "operations" / "examples" / "nginx.conf"
START_S = 10.0

MAIN = """\
{user}worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {folder}/access.log;
    client_body_temp_path {folder}/client_body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    include {folder}/site.conf;
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nginx_binary() -> str:
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if found is None:
        raise RuntimeError("The reverse-proxy tests need nginx: install it (Debian: apt-get install nginx-light).")
    return found


def render_site(text: str, *, listen: int, upstream: int) -> str:
    """The example site with nginx listening on 127.0.0.1:`listen` and forwarding to canon on `upstream`."""
    rendered, listens = re.subn(r"^(\s*)listen 80;", rf"\1listen 127.0.0.1:{listen};", text, flags=re.M)
    rendered, servers = re.subn(r"server 127\.0\.0\.1:8000;", f"server 127.0.0.1:{upstream};", rendered)
    assert (listens, servers) == (1, 1), "the example nginx.conf no longer has the lines the tests change"
    return rendered


def write_config(folder: Path, port: int, upstream: int, site: Path = EXAMPLE) -> list[str]:
    """Write nginx.conf (and the rendered site.conf it includes) into `folder`; nginx's `-p`/`-c` options for it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "site.conf").write_text(render_site(site.read_text(encoding="utf-8"), listen=port, upstream=upstream),
                                      encoding="utf-8")  # fmt: skip
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers must reach the temporary folders in `folder`
    (folder / "nginx.conf").write_text(MAIN.format(user=user, folder=folder), encoding="utf-8")
    return ["-p", str(folder), "-c", str(folder / "nginx.conf")]


def check_config(folder: Path, port: int, upstream: int, site: Path = EXAMPLE) -> subprocess.CompletedProcess[str]:
    """`nginx -t` on the configuration `Nginx.start` would run, as the guide's step says."""
    options = write_config(folder, port, upstream, site)
    return subprocess.run([nginx_binary(), "-t", *options], capture_output=True, text=True, timeout=30, check=False)


@dataclass
class Nginx:
    process: subprocess.Popen[bytes]
    folder: Path
    port: int

    @classmethod
    def start(cls, folder: Path, upstream: int, *, port: int | None = None, site: Path = EXAMPLE) -> Nginx:
        """nginx on 127.0.0.1:`port` (default: a free one) forwarding to canon on `upstream`, running."""
        port = port or free_port()
        command = [nginx_binary(), "-g", "daemon off;", *write_config(folder, port, upstream, site)]
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)  # fmt: skip
        proxy = cls(process, folder, port)
        try:
            proxy._wait_listening()
        except BaseException:
            proxy.stop()
            raise
        return proxy

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + START_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited with {self.process.returncode}: {self.errors()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"nginx did not listen on {self.port} within {START_S} s: {self.errors()}"
                    ) from exc
            threading.Event().wait(0.02)  # a readiness poll: nothing to wait on until the port accepts

    def errors(self) -> str:
        log = self.folder / "error.log"
        return log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful: workers finish, then the master exits
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()
