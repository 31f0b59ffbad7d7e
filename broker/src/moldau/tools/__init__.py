"""Kafka's command line tools, speaking only the Kafka protocol (and ZooKeeper for
zookeeper-shell): `moldau <tool> ...` and the kafka-<tool>.sh entry points."""
