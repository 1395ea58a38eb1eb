"""core.priority: the count of cheap work in flight, and the turns walks take."""

from __future__ import annotations

import threading
import time

from core.priority import Priority, current_request


def test_a_request_counts_until_it_leaves_and_leaving_twice_counts_it_out_once() -> None:
    priority = Priority()
    first, second = priority.enter(), priority.enter()
    assert priority.cheap == 2
    priority.leave(first)
    priority.leave(first)
    assert priority.cheap == 1
    priority.leave(second)
    assert priority.cheap == 0


def test_a_request_running_walks_counts_only_once_they_are_all_done() -> None:
    """A GraphQL query may run several walks for one request: it counts again when the last one ends."""
    priority = Priority(walks=2)
    request = priority.enter()
    token = current_request.set(request)
    try:
        with priority.walk(time.monotonic() + 5) as one:
            assert one is not None
            assert priority.cheap == 0
            with priority.walk(time.monotonic() + 5) as two:
                assert two is not None
                assert priority.cheap == 0
            assert priority.cheap == 0
        assert priority.cheap == 1
    finally:
        current_request.reset(token)
        priority.leave(request)
    assert priority.cheap == 0


def test_a_request_that_leaves_while_its_walk_runs_is_not_counted_again_when_the_walk_ends() -> None:
    priority = Priority()
    request = priority.enter()
    token = current_request.set(request)
    try:
        with priority.walk(time.monotonic() + 5):
            priority.leave(request)  # the client went away; the host is done with it
    finally:
        current_request.reset(token)
    assert priority.cheap == 0


def test_a_walk_that_fails_gives_back_its_turn_and_its_request_counts_again() -> None:
    priority = Priority()
    request = priority.enter()
    token = current_request.set(request)
    try:
        try:
            with priority.walk(time.monotonic() + 5):
                raise KeyError("a walk that failed")
        except KeyError:
            pass
        assert priority.cheap == 1
        with priority.walk(time.monotonic()) as turn:  # free at once: no waiting allowed
            assert turn is not None
    finally:
        current_request.reset(token)
        priority.leave(request)


def test_a_walk_waits_for_the_running_walks_turn_no_longer_than_its_deadline() -> None:
    priority = Priority()
    with priority.walk(time.monotonic() + 5) as running:
        assert running is not None
        outcome: list[object] = []

        def queued() -> None:
            with priority.walk(time.monotonic() + 0.05) as turn:
                outcome.append(turn)

        thread = threading.Thread(target=queued)
        thread.start()
        thread.join(5)
    assert outcome == [None]


def test_a_walk_never_gives_way_past_its_deadline_and_after_a_wait_that_ran_out_walks_on() -> None:
    """Under a flood (cheap work never stops), giving way ends at the deadline, or after `give_way_s`; then the
    walk goes on for at least `give_way_s` before it gives way again."""
    priority = Priority(give_way_s=60)
    flood = priority.enter()
    try:
        with priority.walk(time.monotonic() + 0.05) as turn:
            assert turn is not None
            started = time.monotonic()
            turn.give_way()  # waits until the deadline, not 60 s
            turn.give_way()  # does not wait again: the walk has 60 s to go on before it gives way again
            assert time.monotonic() - started < 30
            assert priority.waiting == 0
    finally:
        priority.leave(flood)
