"""control.plane.listener.name on two brokers of each kind (compat/control_plane.py):
where the controller's requests, the followers' fetches and a controlled shutdown arrive,
and what Metadata answers on each listener. Each column runs its own two brokers on the
lab's ZooKeeper; slow (two broker starts a column), so `make compat` only."""

from __future__ import annotations

from compat import control_plane
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side
from compat.transcript import Transcript


def _zookeeper_root(ctx: Context) -> str:
    """The lab's ZooKeeper without the lab broker's chroot."""
    return ctx.zookeeper_connect.rsplit("/", 1)[0]


def _column(kind: str) -> Side:
    def run(ctx: Context) -> Transcript:
        transcript = Transcript()
        control_plane.run(transcript, ctx.scratch, _zookeeper_root(ctx), kind)
        return transcript

    return Side(f"control-plane/{kind}", KAFKA if kind == "kafka" else MOLDAU, run)


SCENARIOS = [
    Scenario("cluster.control-plane",
             "control.plane.listener.name: the controller's requests on CONTROL, replication "
             "and controlled shutdown on the inter-broker listener, Metadata per listener",
             _column("kafka"), _column("moldau"), fast=False),
]
