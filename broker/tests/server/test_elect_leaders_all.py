"""ElectLeaders of every partition (topic_partitions null) answers, as Kafka 3.9.1 does,
only for the partitions that had an election or failed: those whose leader was already
the right one (ELECTION_NOT_NEEDED) are left out. A named partition keeps its answer.
Found by the reference lab's java-client.admin scenario. The handler runs against a
controller stand-in that returns what the real one's elections return."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from moldau.errors import ElectionNotNeededError, PreferredLeaderNotAvailableError
from moldau.protocol.generated.elect_leaders_request import ElectLeadersRequest
from moldau.server.handlers.elect_leaders import ElectLeadersHandler

OUTCOMES = {("a", 0): ElectionNotNeededError("Leader election not needed for topic partition."),
            ("a", 1): None,
            ("b", 0): PreferredLeaderNotAvailableError("Failed to elect leader for partition b-0")}


async def _elect(partitions: Any, preferred: bool) -> Any:
    return dict(OUTCOMES) if partitions is None else {tp: OUTCOMES[tp] for tp in partitions}


def _answer(request: ElectLeadersRequest) -> dict[tuple[str, int], int]:
    controller = SimpleNamespace(active=True, elect_leaders=_elect)
    ctx = SimpleNamespace(api_version=2, authorize=lambda *args: True)
    response = asyncio.run(ElectLeadersHandler(lambda: controller)(ctx, request))  # type: ignore[arg-type]
    return {(t.topic, p.partition_id): p.error_code
            for t in response.replica_election_results for p in t.partition_result}


def test_every_partition_leaves_out_the_elections_not_needed() -> None:
    answer = _answer(ElectLeadersRequest(election_type=0, topic_partitions=None, timeout_ms=1000))
    assert answer == {("a", 1): 0, ("b", 0): PreferredLeaderNotAvailableError.code}


def test_a_named_partition_whose_election_is_not_needed_is_answered() -> None:
    topic = ElectLeadersRequest.TopicPartitions(topic="a", partitions=[0])
    answer = _answer(ElectLeadersRequest(election_type=0, topic_partitions=[topic],
                                         timeout_ms=1000))
    assert answer == {("a", 0): ElectionNotNeededError.code}
