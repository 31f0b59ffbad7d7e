"""Prometheus exporters for Moldau: the broker's MBeans under the names the Prometheus JMX
exporter gives Kafka's (broker_exporter, jmx_rules)."""
