"""Moldau: a Kafka-compatible streaming broker for bare metal."""

__version__ = "0.1.0"
