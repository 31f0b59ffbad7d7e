"""Moldau's own Kafka protocol client, on the generated codec (tools, health checks,
tests; later the replica fetchers and the controller channel)."""
