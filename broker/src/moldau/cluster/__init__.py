"""ZooKeeper access (kazoo), the controller, the replica manager and fetchers.

`zk_data` holds Kafka 3.9's znode paths and JSON payloads (pure), `zk_client` the
synchronous KafkaZkClient on kazoo, `zk_async` its asyncio wrapper, and `zk_ensemble` a
launcher for a local ZooKeeper ensemble (tests and the development cluster).
"""
