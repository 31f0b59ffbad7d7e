"""Broker metrics with Kafka's MBean names and Yammer's metric types (meters, histograms,
timers, gauges), and the JMX-like HTTP endpoint that serves them."""
