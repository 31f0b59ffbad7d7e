"""Moldau's generator of protocol message classes from Kafka's JSON definitions."""
