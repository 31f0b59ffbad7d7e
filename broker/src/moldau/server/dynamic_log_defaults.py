"""A change of the broker-level topic defaults applied to a running broker."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from moldau.replication.replica_manager import ReplicaManager
    from moldau.storage.config import LogConfig
    from moldau.storage.log_manager import LogManager

    from .topic_configs import TopicConfigs


def apply_log_defaults(log_config: LogConfig, topic_configs: TopicConfigs,
                       log_manager: LogManager | None,
                       replica_manager: ReplicaManager | None) -> None:
    """What a change of the broker-level topic defaults does to a running broker (Kafka's
    DynamicLogConfig.reconfigure): new logs and every topic without an override of a key
    follow the new default at once. The managers are None before the broker opened its
    logs."""
    topic_configs.set_broker_defaults(log_config)
    if log_manager is not None:
        log_manager.default_log_config = log_config
    if replica_manager is not None:
        for (topic, _index), partition in replica_manager.partitions.items():
            partition.log.config = topic_configs.log_config(topic)
