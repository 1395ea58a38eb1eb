"""Child processes for the real-client tests: bounded reads of their output, and a stop that always happens."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["Lines", "outputs", "run", "start", "stop"]


class Lines:
    """The lines a child writes to one pipe, read on a thread so that every wait has a deadline.

    Reading on a thread also drains the pipe, so a chatty child never blocks on a full one.
    """

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            for line in self.stream:
                self._queue.put(line.rstrip("\n"))
        except ValueError:  # the stream was closed under us by close(): nothing more to read
            pass
        finally:
            self._queue.put(None)

    def next(self, deadline: float) -> str | None:
        """The next line, or None at end of output; `TimeoutError` if none comes before `deadline` (monotonic)."""
        try:
            line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError("no output before the deadline") from None
        if line is None:
            self._queue.put(None)  # stay at end of output for later calls
        else:
            self.seen.append(line)
        return line

    def wait_for(self, wanted: Callable[[str], bool], timeout: float) -> str:
        """The first line for which `wanted` is true; `TimeoutError` or `EOFError` (with what was seen) otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.next(deadline)
            except TimeoutError:
                raise TimeoutError(f"no wanted line within {timeout} s; seen: {self.text()}") from None
            if line is None:
                raise EOFError(f"output ended before a wanted line; seen: {self.text()}")
            if wanted(line):
                return line

    def text(self) -> str:
        return "\n".join(self.seen)

    def close(self) -> None:
        self._thread.join(timeout=5)
        self.stream.close()


def start(command: Sequence[str | Path], *, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """Start `command` in a session of its own, so that `stop` can also end whatever it starts."""
    return subprocess.Popen(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def outputs(process: subprocess.Popen[str]) -> tuple[Lines, Lines]:
    """Readers of a `start`ed process's stdout and stderr (both drained, so it never blocks on a full pipe)."""
    if process.stdout is None or process.stderr is None:
        raise ValueError("start the process with start(): it pipes stdout and stderr")
    return Lines(process.stdout), Lines(process.stderr)


def stop(process: subprocess.Popen[Any], timeout: float = 10) -> int:
    """End `process` (terminate, then kill past `timeout`), reap it, then end what it left running; its exit code."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)
    _end_session(process.pid, timeout)
    return process.returncode


def _end_session(group: int, timeout: float) -> None:
    """Terminate, then kill, what is left of the process group `start` made (a server a client spawned)."""
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)  # polling a condition under a deadline
    os.killpg(group, signal.SIGKILL)


def run(
    command: Sequence[str | Path], *, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run `command` to completion within `timeout` seconds (`TimeoutError` past it); it is stopped in any case."""
    process = start(command, cwd=cwd, env=env)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"{command[0]} did not finish within {timeout} s") from None
    finally:
        stop(process)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
