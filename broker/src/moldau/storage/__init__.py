"""Kafka's on-disk formats: segment indexes, checkpoint files and log directory metadata.

`index` holds the memory-mapped offset and time indexes of a log segment, `checkpoints` the
small text files of a log directory (offset checkpoints, leader epochs, partition.metadata,
meta.properties), and `files` the durable-write helpers they share.
"""
