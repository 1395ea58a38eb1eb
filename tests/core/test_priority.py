"""core.values.priority: graph walks take turns."""

from __future__ import annotations

import threading
import time

import pytest

from core.values.priority import Priority


def test_a_walk_waits_for_the_running_walks_turn_no_longer_than_its_deadline() -> None:
    priority = Priority()
    with priority.walk(time.monotonic() + 5) as running:
        assert running
        outcome: list[bool] = []

        def queued() -> None:
            with priority.walk(time.monotonic() + 0.05) as turn:
                outcome.append(turn)

        thread = threading.Thread(target=queued)
        thread.start()
        thread.join(5)
    assert outcome == [False]


def test_a_walk_that_fails_gives_back_its_turn() -> None:
    priority = Priority()
    with pytest.raises(KeyError), priority.walk(time.monotonic() + 5):
        raise KeyError("a walk that failed")
    with priority.walk(time.monotonic()) as turn:  # free at once: no waiting allowed
        assert turn
