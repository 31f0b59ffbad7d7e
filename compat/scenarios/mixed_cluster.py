"""A mixed cluster: a Moldau broker and a Kafka 3.9.1 broker in one ZooKeeper chroot at
IBP 3.9, the controller and every leader moving both ways under the durability checker
(compat/mixed.py), against the same moves on two Kafka brokers. Each column runs its own
cluster on the lab's ZooKeeper; slow (four broker starts a column), so `make compat` only.
"""

from __future__ import annotations

from compat import mixed
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side
from compat.transcript import Transcript


def _zookeeper_root(ctx: Context) -> str:
    """The lab's ZooKeeper without the lab broker's chroot."""
    return ctx.zookeeper_connect.rsplit("/", 1)[0]


def kafka_cluster(ctx: Context) -> Transcript:
    transcript = Transcript()
    mixed.run(transcript, ctx.scratch, _zookeeper_root(ctx), ("kafka", "kafka"))
    return transcript


def mixed_cluster(ctx: Context) -> Transcript:
    """Moldau first (its controller drives Kafka), then Kafka's controller drives Moldau."""
    transcript = Transcript()
    mixed.run(transcript, ctx.scratch, _zookeeper_root(ctx), ("moldau", "kafka"))
    return transcript


SCENARIOS = [
    Scenario("mixed.cluster",
             "Moldau and Kafka in one chroot: controller and leaders move both ways, "
             "nothing lost (vs two Kafka brokers)",
             Side("mixed/kafka-kafka", KAFKA, kafka_cluster),
             Side("mixed/moldau-kafka", MOLDAU, mixed_cluster),
             fast=False),
]
