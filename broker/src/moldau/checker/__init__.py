"""The durability checker: an idempotent acks=all producer writes sequenced records while
faults happen, a consumer reads everything back, and the report names, per partition,
the acknowledged-but-lost, duplicated and out-of-order records (docs/checker.md).

    from moldau.checker.producer import ProducerRun
    from moldau.checker.consumer import verify

    run = ProducerRun(bootstrap, topic, rate=200).start()
    ...  # faults
    report = verify(run)  # stops the run, reads back, accounts
    assert report.ok, report.summary()

This package imports only the pure parts (record format, accounting); `producer` and
`consumer` need confluent-kafka.
"""

from moldau.checker.records import CheckerRecord, CorruptRecord, encode, parse
from moldau.checker.report import (
           PartitionRead,
           PartitionReport,
           PartitionWrites,
           Report,
           build_report,
)

__all__ = ["CheckerRecord", "CorruptRecord", "PartitionRead", "PartitionReport",
           "PartitionWrites", "Report", "build_report", "encode", "parse"]
