"""GraphQL's subscription to a proposal (`resource_proposal(id:)`, over WebSocket with graphql-transport-ws): the
subscriber is sent the proposal's resource, as it may read it, each time the proposal changes, and hears it merged;
a proposal that does not exist is an error, not a silent stream."""

from __future__ import annotations

import json
import threading
from typing import Any

from core.dispatch import proposals
from core.seam.instance import Instance
from core.values.principal import Principal, Reviewers
from tests.generators.conftest import live, token
from tests.generators.graphql.test_schema import SURFACES, _init, _ws  # pyright: ignore[reportPrivateUsage]

AUTHOR = Principal("agent", frozenset({"writer"}))
REVIEWER = Principal("rita", frozenset({"writer"}), frozenset({"reviewers"}))
QUERY = 'subscription { resource_proposal(id: "%s") { uri mimeType text } }'


def _heard(socket: Any) -> dict[str, Any]:
    message = json.loads(socket.recv(timeout=30))
    assert message["type"] == "next", message
    shown: dict[str, Any] = message["payload"]["data"]["resource_proposal"]
    return shown


def test_a_proposal_subscription_hears_its_discussion_and_its_merge(fresh_instance: Instance) -> None:
    store = fresh_instance.store
    operations = [{"op": "patch_node", "id": "team-payments", "properties": {"mission": "Proposed."}}]
    p = proposals.propose(store, AUTHOR, operations, "Mission", "It changed.")
    secret = token(fresh_instance, "gq-agent", "writer")
    with live(fresh_instance, SURFACES) as base, _ws(base) as socket:
        assert _init(socket, {"Authorization": f"Bearer {secret}"})["type"] == "connection_ack"
        socket.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": QUERY % p.id}}))
        # the subscription hears from some point after `subscribe`: comment until it hears one (no sleep decides)
        stop = threading.Event()

        def discuss() -> None:
            for n in range(300):
                if stop.wait(0.1):
                    return
                proposals.comment(store, REVIEWER, p.id, f"Comment {n}.")

        talker = threading.Thread(target=discuss)
        talker.start()
        try:
            first = _heard(socket)
        finally:
            stop.set()
            talker.join(30)
        assert first["uri"] == f"canon://proposals/{p.id}"
        assert json.loads(first["text"])["proposal"]["comments"]
        proposals.review(store, REVIEWER, p.id, "approve", "Yes.", Reviewers())
        states = []
        while not states or states[-1] != "merged":
            states.append(json.loads(_heard(socket)["text"])["proposal"]["state"])
        assert states[-1] == proposals.get(store, p.id).state == "merged"


def test_a_subscription_to_a_proposal_that_does_not_exist_is_an_error(fresh_instance: Instance) -> None:
    secret = token(fresh_instance, "gq-agent", "writer")
    with live(fresh_instance, SURFACES) as base, _ws(base) as socket:
        assert _init(socket, {"Authorization": f"Bearer {secret}"})["type"] == "connection_ack"
        socket.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": QUERY % "p-000000000000"}}))
        message = json.loads(socket.recv(timeout=30))
        assert message["type"] == "error" or (message["type"] == "next" and message["payload"].get("errors")), message
        errors = message["payload"] if message["type"] == "error" else message["payload"]["errors"]
        assert errors[0]["extensions"]["code"] == "NOT_FOUND", errors
