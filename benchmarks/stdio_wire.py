"""The benchmarks' MCP client over stdio: raw newline-delimited JSON-RPC, one request at a time, counting the bytes
a client reads (`benchmarks/agent_tasks.py`, `benchmarks/context_budget.py`)."""

from __future__ import annotations

import json
import subprocess
from contextlib import suppress
from pathlib import Path
from typing import Any

PROTOCOL = "2025-11-25"
Json = dict[str, Any]


class Wire:
    """One server over stdio, one request at a time, counting every byte it sends back: `received` in all (each
    line read, with its newline), `last_size` of the last answer (its line without the newline)."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path, client: str) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env, cwd=cwd)  # fmt: skip
        self.client = client
        self.received = 0
        self.last_size = 0
        self.calls = 0
        self.next_id = 0

    def request(self, method: str, params: Json) -> Json:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the server ended before answering {method}")
            self.received += len(line)
            answer = json.loads(line)
            if answer.get("id") == self.next_id:
                self.last_size = len(line.rstrip(b"\n"))
                if "error" in answer:
                    raise RuntimeError(f"{method} {params}: {answer['error']}")
                result: Json = answer["result"]
                return result

    def start(self) -> Json:
        result = self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                             "clientInfo": {"name": self.client, "version": "1"}})  # fmt: skip
        assert self.process.stdin is not None
        self.process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.process.stdin.flush()
        return result

    def tool(self, name: str, arguments: Json) -> Json:
        """A tool's result object: its structured content, else the JSON of its text."""
        self.calls += 1
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{name} {arguments}: {result['content'][0]['text']}")
        if "structuredContent" in result:
            structured: Json = result["structuredContent"]
            return structured
        parsed: Json = json.loads(result["content"][0]["text"])
        return parsed

    def close(self) -> None:
        if self.process.stdin is not None:
            with suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
