"""KafkaZkClient: the broker's ZooKeeper operations, on kazoo, in Kafka 3.9's layout.

The client is one session (`zk_session.ZkSession`: connection, retries, listeners, the
broker registration renewed after an expiry, the generic znode operations and watches)
with Kafka's znode operations on top. Those live in a module per subject, and the class
body below binds each as a method, so `zk.client.create_topic(...)` and typed bound
methods (`await azk.call(azk.client.get_broker_ids)`) work as on any method:

- `zk_broker_ops.py`: persistent paths, cluster id, broker ids and registrations,
  producer id blocks;
- `zk_topic_ops.py`: topics, their assignment and deletion, partition states;
- `zk_config_ops.py`: entity configs and their change notifications;
- `zk_user_ops.py`: user configs (SCRAM credentials and quotas), compare-and-set writes;
- `zk_quota_ops.py`: client quota entities (users, users' client ids, client ids, ips);
- `zk_token_ops.py`: delegation tokens and their change notifications;
- `zk_controller_ops.py`: the controller's election and the notifications sent to it;
- `zk_features.py`: /feature, the finalized features (KIP-584).

The znodes' paths and JSON are `zk_data.py`; the errors are `zk_errors.py`.

The methods block (kazoo's synchronous API): the broker calls them through `AsyncZk`, which
runs them in a dedicated thread so ZooKeeper never stalls the event loop. Each operation is
retried while the connection is down (up to the session timeout, as a Kafka broker keeps
retrying until its session expires), then raises ZooKeeperUnavailableError.

Watch callbacks and state listeners run on kazoo's threads: they must not block on
ZooKeeper calls (AsyncZk hops them onto the event loop).
"""

from __future__ import annotations

from moldau.cluster import (
    zk_broker_ops,
    zk_config_ops,
    zk_consumer_ops,
    zk_controller_ops,
    zk_features,
    zk_quota_ops,
    zk_token_ops,
    zk_topic_ops,
    zk_user_ops,
)
from moldau.cluster.zk_broker_ops import DEFAULT_RESERVED_BROKER_MAX_ID
from moldau.cluster.zk_config_ops import CONFIG_CHANGE_EXPIRATION_MS
from moldau.cluster.zk_errors import (
    ControllerMovedError,
    ZkBadVersionError,
    ZkError,
    ZkNodeExistsError,
    ZkNoNodeError,
    ZooKeeperUnavailableError,
)
from moldau.cluster.zk_session import WatchHandle, ZkSession

# Imported from here across the broker, the tools and the tests.
__all__ = [
    "CONFIG_CHANGE_EXPIRATION_MS",
    "DEFAULT_RESERVED_BROKER_MAX_ID",
    "ControllerMovedError",
    "KafkaZkClient",
    "WatchHandle",
    "ZkBadVersionError",
    "ZkError",
    "ZkNoNodeError",
    "ZkNodeExistsError",
    "ZooKeeperUnavailableError",
]


class KafkaZkClient(ZkSession):
    """Kafka's KafkaZkClient operations over one kazoo session; see the module docstring."""

    # -- startup paths, cluster id, brokers, producer ids (zk_broker_ops) --------------------
    ensure_persistent_paths = zk_broker_ops.ensure_persistent_paths
    get_cluster_id = zk_broker_ops.get_cluster_id
    get_or_create_cluster_id = zk_broker_ops.get_or_create_cluster_id
    generate_broker_id = zk_broker_ops.generate_broker_id
    get_broker_ids = zk_broker_ops.get_broker_ids
    get_broker = zk_broker_ops.get_broker
    get_all_brokers = zk_broker_ops.get_all_brokers
    allocate_producer_id_block = zk_broker_ops.allocate_producer_id_block

    # -- topics and partition states (zk_topic_ops) -------------------------------------------
    topic_exists = zk_topic_ops.topic_exists
    create_topic = zk_topic_ops.create_topic
    get_topic_assignment = zk_topic_ops.get_topic_assignment
    get_topic_assignments = zk_topic_ops.get_topic_assignments
    set_topic_assignment = zk_topic_ops.set_topic_assignment
    set_partition_reassignment = zk_topic_ops.set_partition_reassignment
    get_all_topics = zk_topic_ops.get_all_topics
    get_topics_marked_for_deletion = zk_topic_ops.get_topics_marked_for_deletion
    mark_topic_for_deletion = zk_topic_ops.mark_topic_for_deletion
    delete_topic_znodes = zk_topic_ops.delete_topic_znodes
    create_partition_states = zk_topic_ops.create_partition_states
    get_partition_state = zk_topic_ops.get_partition_state
    get_partition_states = zk_topic_ops.get_partition_states
    update_partition_state = zk_topic_ops.update_partition_state

    # -- configs (zk_config_ops) ----------------------------------------------------------------
    get_entity_config = zk_config_ops.get_entity_config
    set_entity_config = zk_config_ops.set_entity_config
    create_config_change_notification = zk_config_ops.create_config_change_notification
    delete_entity_config = zk_config_ops.delete_entity_config
    get_all_entity_names = zk_config_ops.get_all_entity_names
    read_change_notifications = zk_config_ops.read_change_notifications
    watch_config_changes = zk_config_ops.watch_config_changes

    # -- users: SCRAM credentials and quotas in one config map (zk_user_ops) ------------------
    get_user_config = zk_user_ops.get_user_config
    get_all_user_configs = zk_user_ops.get_all_user_configs
    update_user_config = zk_user_ops.update_user_config

    # -- client quota entities, written through zk_user_ops' compare-and-set (zk_quota_ops) --
    get_quota_entity_config = zk_quota_ops.get_quota_entity_config
    get_ip_quota_config = zk_quota_ops.get_ip_quota_config
    get_all_quota_entity_configs = zk_quota_ops.get_all_quota_entity_configs
    get_all_ip_quota_configs = zk_quota_ops.get_all_ip_quota_configs
    update_quota_entity_config = zk_quota_ops.update_quota_entity_config
    update_ip_quota_config = zk_quota_ops.update_ip_quota_config

    # -- delegation tokens and their change notifications (zk_token_ops) ---------------------
    create_delegation_token_paths = zk_token_ops.create_delegation_token_paths
    get_delegation_token_ids = zk_token_ops.get_delegation_token_ids
    get_delegation_token = zk_token_ops.get_delegation_token
    get_all_delegation_tokens = zk_token_ops.get_all_delegation_tokens
    set_or_create_delegation_token = zk_token_ops.set_or_create_delegation_token
    delete_delegation_token = zk_token_ops.delete_delegation_token
    create_token_change_notification = zk_token_ops.create_token_change_notification
    read_token_changes = zk_token_ops.read_token_changes

    # -- the old consumers' offsets of OffsetCommit/OffsetFetch v0 (zk_consumer_ops) ---------
    set_or_create_consumer_offset = zk_consumer_ops.set_or_create_consumer_offset
    get_consumer_offset = zk_consumer_ops.get_consumer_offset

    # -- /feature, the finalized features (zk_features) ---------------------------------------
    get_features = zk_features.get_features
    enable_feature_versioning = zk_features.enable_feature_versioning
    write_features = zk_features.write_features

    # -- the controller and its notifications (zk_controller_ops) ------------------------------
    get_controller_id = zk_controller_ops.get_controller_id
    get_controller_epoch = zk_controller_ops.get_controller_epoch
    try_elect_controller = zk_controller_ops.try_elect_controller
    resign_controller = zk_controller_ops.resign_controller
    create_isr_change_notification = zk_controller_ops.create_isr_change_notification
    take_isr_change_notifications = zk_controller_ops.take_isr_change_notifications
    create_log_dir_event_notification = zk_controller_ops.create_log_dir_event_notification
    take_log_dir_event_notifications = zk_controller_ops.take_log_dir_event_notifications
