"""A hanging transaction for TransactionsCommand's `find-hanging`: transactional records
in a partition whose coordinator never heard of their producer, as a client that wrote
to a partition without AddPartitionsToTxn left them before Kafka 3.6 verified such
writes. Both kinds need `transaction.partition.verification.enable=false` for it (the
broker otherwise asks the coordinator and refuses the write); the scenario sets it as
the brokers' dynamic default with ConfigCommand and deletes it afterwards."""

from __future__ import annotations

import time

from moldau.client.blocking import BlockingConnection
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.produce_request import ProduceRequest
from moldau.protocol.records import build_batch

# No coordinator allocated it: the trio's clusters run no transactional producer, and
# their producer id blocks start at 0.
PRODUCER_ID = 424_242
RECORD_TIME = 1_700_000_000_000  # fixed: find-hanging prints the last timestamp
PRODUCE_VERSION = 9
VERIFICATION_OFF_TIMEOUT = 60.0  # the dynamic default reaches every broker through ZooKeeper


def produce_unverified(port: int, topic: str, transactional_id: str) -> int:
    """One transactional batch to partition 0 of `topic` at the leader on `port`, retried
    until the broker takes it (verification off has reached it); the error code of the
    last answer (0 once written)."""
    batch = build_batch([(b"k", b"hanging", [], RECORD_TIME)], producer_id=PRODUCER_ID,
                        producer_epoch=0, base_sequence=0, is_transactional=True)
    request = ProduceRequest(acks=-1, timeout_ms=10_000, transactional_id=transactional_id,
                             topic_data=[ProduceRequest.TopicProduceData(
                                 name=topic, partition_data=[
                                     ProduceRequest.PartitionProduceData(index=0,
                                                                         records=batch)])])
    deadline = time.monotonic() + VERIFICATION_OFF_TIMEOUT
    while True:
        with BlockingConnection("127.0.0.1", port, timeout=15) as conn:
            response = conn.request(ApiKey.PRODUCE, PRODUCE_VERSION, request)
        code = int(response.responses[0].partition_responses[0].error_code)
        if code == 0 or time.monotonic() > deadline:
            return code
        time.sleep(0.5)
