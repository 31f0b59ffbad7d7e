"""A broker's controlled shutdown (Kafka's KafkaServer.controlledShutdown).

Before it stops serving, the broker asks the controller to move the leadership of its
replicated partitions to other ISR members and to drop it from their ISRs, so clients
switch leaders without waiting for a ZooKeeper session to expire. The controller answers
with the partitions it could not move (no other live ISR member); the broker retries
`controlled.shutdown.max.retries` times, `controlled.shutdown.retry.backoff.ms` apart, and
then stops anyway, as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.client.broker_connection import BrokerConnection
from moldau.client.security import ClientSecurity
from moldau.errors import KafkaError
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.controlled_shutdown_request import ControlledShutdownRequest

if TYPE_CHECKING:
    from moldau.cluster.controller import Controller
    from moldau.cluster.zk_async import AsyncZk
    from moldau.replication.protocol_versions import InterBrokerVersions

    from .config import BrokerConfig
    from .handlers.services import BrokerState
    from .metadata_cache import MetadataCache

log = logging.getLogger("kafka.server.KafkaServer")


class ControlledShutdownFailed(Exception):
    pass


@dataclass(frozen=True)
class ShutdownServices:
    """What a controlled shutdown asks with, taken when the broker stops."""

    config: BrokerConfig
    state: BrokerState  # this broker's id and registration epoch
    zk: AsyncZk | None  # None when the broker stops before it connected
    metadata: MetadataCache  # where the controller's inter-broker listener is
    controller: Controller | None  # this broker's own, asked in place when it is active
    versions: InterBrokerVersions
    security_for: Callable[[], ClientSecurity]


async def controlled_shutdown(services: ShutdownServices) -> None:
    config = services.config
    if services.zk is None or not services.zk.client.connected:
        # without ZooKeeper no controller can elect new leaders: nothing to ask for
        log.warning("[KafkaServer id=%d] Skipping controlled shutdown: ZooKeeper is not "
                    "connected", services.state.broker_id)
        return
    log.info("[KafkaServer id=%d] Starting controlled shutdown", services.state.broker_id)
    started = time.monotonic()
    retries = max(config["controlled.shutdown.max.retries"], 1)
    for attempt in range(1, retries + 1):
        try:
            remaining = await _ask_controller(services, services.zk)
            if not remaining:
                log.info("[KafkaServer id=%d] Controlled shutdown request returned "
                         "successfully after %dms", services.state.broker_id,
                         (time.monotonic() - started) * 1000)
                return
            log.info("[KafkaServer id=%d] Remaining partitions to move: %s",
                     services.state.broker_id, ",".join(f"{t}-{p}" for t, p in remaining))
        except (ControlledShutdownFailed, KafkaError, OSError, ConnectionError,
                TimeoutError) as exc:
            log.warning("[KafkaServer id=%d] Error during controlled shutdown: %s",
                        services.state.broker_id, exc)
        if attempt < retries:
            log.warning("[KafkaServer id=%d] Retrying controlled shutdown after the previous "
                        "attempt failed...", services.state.broker_id)
            await asyncio.sleep(config["controlled.shutdown.retry.backoff.ms"] / 1000)
    log.warning("[KafkaServer id=%d] Proceeding to do an unclean shutdown as all the "
                "controlled shutdown attempts failed", services.state.broker_id)


async def _ask_controller(services: ShutdownServices, zk: AsyncZk) -> list[tuple[str, int]]:
    state = services.state
    controller_id = await zk.call(zk.client.get_controller_id)
    if controller_id is None:
        raise ControlledShutdownFailed("no controller is elected")
    if controller_id == state.broker_id:
        controller = services.controller
        if controller is None or not controller.active:
            raise ControlledShutdownFailed("this broker's controller is not active yet")
        return await controller.controlled_shutdown(state.broker_id, state.broker_epoch)
    listener = services.config.inter_broker_listener_name
    address = services.metadata.endpoint(controller_id, listener)
    if address is None:
        raise ControlledShutdownFailed(f"no {listener} endpoint known for controller "
                                       f"{controller_id}")
    timeout_s = services.config["controller.socket.timeout.ms"] / 1000
    security = services.security_for()
    connection = await BrokerConnection.connect(
        address[0], address[1], client_id=f"broker-{state.broker_id}-shutdown",
        ssl_context=security.ssl_context, sasl=security.sasl, timeout_s=timeout_s)
    try:
        response = await connection.request(
            ApiKey.CONTROLLED_SHUTDOWN, services.versions.controlled_shutdown,
            ControlledShutdownRequest(broker_id=state.broker_id,
                                      broker_epoch=state.broker_epoch), timeout_s)
    finally:
        connection.close()
    if response.error_code:
        raise ControlledShutdownFailed(f"the controller answered error {response.error_code}")
    return [(p.topic_name, p.partition_index) for p in response.remaining_partitions]
