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
from typing import TYPE_CHECKING

from moldau.client.broker_connection import BrokerConnection
from moldau.errors import KafkaError
from moldau.protocol.api import ApiKey
from moldau.protocol.messages.controlled_shutdown_request import ControlledShutdownRequest

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("kafka.server.KafkaServer")


class ControlledShutdownFailed(Exception):
    pass


async def controlled_shutdown(broker: Broker) -> None:
    config = broker.config
    if broker.zk is None or not broker.zk.client.connected:
        # without ZooKeeper no controller can elect new leaders: nothing to ask for
        log.warning("[KafkaServer id=%d] Skipping controlled shutdown: ZooKeeper is not "
                    "connected", broker.broker_id)
        return
    log.info("[KafkaServer id=%d] Starting controlled shutdown", broker.broker_id)
    started = time.monotonic()
    retries = max(config["controlled.shutdown.max.retries"], 1)
    for attempt in range(1, retries + 1):
        try:
            remaining = await _ask_controller(broker)
            if not remaining:
                log.info("[KafkaServer id=%d] Controlled shutdown request returned "
                         "successfully after %dms", broker.broker_id,
                         (time.monotonic() - started) * 1000)
                return
            log.info("[KafkaServer id=%d] Remaining partitions to move: %s",
                     broker.broker_id, ",".join(f"{t}-{p}" for t, p in remaining))
        except (ControlledShutdownFailed, KafkaError, OSError, ConnectionError,
                TimeoutError) as exc:
            log.warning("[KafkaServer id=%d] Error during controlled shutdown: %s",
                        broker.broker_id, exc)
        if attempt < retries:
            log.warning("[KafkaServer id=%d] Retrying controlled shutdown after the previous "
                        "attempt failed...", broker.broker_id)
            await asyncio.sleep(config["controlled.shutdown.retry.backoff.ms"] / 1000)
    log.warning("[KafkaServer id=%d] Proceeding to do an unclean shutdown as all the "
                "controlled shutdown attempts failed", broker.broker_id)


async def _ask_controller(broker: Broker) -> list[tuple[str, int]]:
    controller_id = await broker.zk.call(broker.zk.client.get_controller_id)  # type: ignore[union-attr]
    if controller_id is None:
        raise ControlledShutdownFailed("no controller is elected")
    if controller_id == broker.broker_id:
        controller = broker.controller
        if controller is None or not controller.active:
            raise ControlledShutdownFailed("this broker's controller is not active yet")
        return await controller.controlled_shutdown(broker.broker_id, broker.state.broker_epoch)
    listener = broker.config.inter_broker_listener_name
    address = broker.metadata.endpoint(controller_id, listener)
    if address is None:
        raise ControlledShutdownFailed(f"no {listener} endpoint known for controller "
                                       f"{controller_id}")
    timeout_s = broker.config["controller.socket.timeout.ms"] / 1000
    connection = await BrokerConnection.connect(
        address[0], address[1], client_id=f"broker-{broker.broker_id}-shutdown",
        ssl_context=broker.inter_broker_ssl_context(), timeout_s=timeout_s)
    try:
        response = await connection.request(
            ApiKey.CONTROLLED_SHUTDOWN, broker.versions.controlled_shutdown,
            ControlledShutdownRequest(broker_id=broker.broker_id,
                                      broker_epoch=broker.state.broker_epoch), timeout_s)
    finally:
        connection.close()
    if response.error_code:
        raise ControlledShutdownFailed(f"the controller answered error {response.error_code}")
    return [(p.topic_name, p.partition_index) for p in response.remaining_partitions]
