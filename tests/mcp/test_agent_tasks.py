"""The canon side of the agent-task benchmark (`benchmarks/agent_tasks.py`), so its answers cannot silently rot:
every question's fixed call sequence, run over the official SDK client in memory on the agent profile, must give
the answer computed from the sample data."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.from_thread
import mcp_types as types
import pytest

from benchmarks.agent_questions import QUESTIONS, Seed, set_up
from core.mcp.server import ServeOptions
from core.seam.instance import Instance
from tests.mcp.conftest import serve

pytestmark = pytest.mark.anyio


def test_the_benchmark_asks_at_least_twenty_questions() -> None:
    assert len(QUESTIONS) >= 20
    assert len({q.text for q in QUESTIONS}) == len(QUESTIONS)


async def test_canon_answers_every_agent_task_question_right_on_the_agent_profile(
    instance: Instance, revision: str
) -> None:
    seed = Seed.load()
    async with serve(instance, ServeOptions(profile="agent")).client(revision) as client:
        listed = {"tools": [t.model_dump(by_alias=True) for t in (await client.list_tools()).tools]}

        def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = anyio.from_thread.run(client.call_tool, name, arguments)
            assert isinstance(result.content[0], types.TextContent)
            assert not result.is_error, result.content[0].text
            answer: dict[str, Any] = json.loads(result.content[0].text)
            return answer

        def answer_all() -> list[Any]:
            agent = set_up(call, listed)
            return [q.canon(agent) for q in QUESTIONS]

        with anyio.fail_after(60):
            answers = await anyio.to_thread.run_sync(answer_all)

    wrong = [(q.text, got, q.expected(seed)) for q, got in zip(QUESTIONS, answers, strict=True)
             if got != q.expected(seed)]  # fmt: skip
    assert wrong == []
