"""Replication between brokers: the versions brokers speak to each other, the controller's
channel to the brokers, the replica fetchers and the leader's view of its followers."""
