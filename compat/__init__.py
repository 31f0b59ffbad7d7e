"""The reference lab (issue 39): Apache Kafka 3.9.1 beside Moldau on 127.0.0.1, and
differential scenarios that run the same thing against both and compare what a user sees.

`compat/fetch` puts Kafka's jars in the cache, `launcher` runs Kafka's classes from there,
`lab` starts a ZooKeeper node, a Kafka broker and a Moldau broker, `scenarios` hold the
comparisons and `python -m compat` (`make compat`) runs them all. docs/compat.md tells
the rest.
"""
