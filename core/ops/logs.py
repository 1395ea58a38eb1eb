"""canon's log lines: plain text (the default) or one JSON object per line (`[logging] format = "json"`).

`configure_logging` is what `canon serve` and each worker process call once, before anything logs. A JSON line has
`time` (ISO 8601 UTC), `level`, `logger` and `message`, the fields a record was given with `extra=` (the access
log's, `core.http.access`), and `exception` when there is one.

The MCP SDK logs HTTP session ids at info (`Created new transport with session ID: …`, `Terminating session: …`,
`Session … idle timeout`, and the id a client sent that it rejected): whoever reads the log could join a session
with one, so `SessionIdFilter` blanks them from every line, in either format.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

from core.ops.config import Config

__all__ = ["ACCESS", "FIELDS", "JsonFormatter", "SessionIdFilter", "configure_logging"]

ACCESS = "canon.access"
"""The access log's logger (`core.http.access`)."""
TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FIELDS = "canon_fields"
"""The `extra=` key whose mapping a JSON line carries as top-level fields."""


class SessionIdFilter(logging.Filter):
    """Blanks MCP session ids out of the MCP SDK's log records (the `mcp` loggers): any UUID, hex or dashed (what
    the SDK makes them of), and whatever follows `session ID:` (what a client sent, which may be another's id)."""

    HIDDEN = "<session id>"
    _ID = re.compile(r"\b[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\b", re.IGNORECASE)
    _SENT = re.compile(r"(session ID: ).*", re.IGNORECASE | re.DOTALL)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "mcp" or record.name.startswith("mcp."):
            message = self._SENT.sub(rf"\g<1>{self.HIDDEN}", record.getMessage())
            record.msg, record.args = self._ID.sub(self.HIDDEN, message), None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging(level: int | str, config: Config) -> None:
    """Send every log record at `level` or above to standard error, in the configured format; with the access log
    on, its lines too (at info, whatever `level` is)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if config.log_format == "json" else logging.Formatter(TEXT))
    handler.addFilter(SessionIdFilter())
    logging.basicConfig(level=level, handlers=[handler])
    if config.access_log:
        logging.getLogger(ACCESS).setLevel(logging.INFO)
