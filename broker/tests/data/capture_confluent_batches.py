"""Capture the record batches that librdkafka (confluent-kafka) writes, for each codec.

librdkafka has no way to build a batch without a broker, so this script runs a minimal
stand-in broker on 127.0.0.1 built on Moldau's protocol codec: it answers ApiVersions,
Metadata, InitProducerId and Produce, and saves the records blob of every Produce
request. The results are committed as test data; rerun with

    .venv/bin/python broker/tests/data/capture_confluent_batches.py

to regenerate broker/tests/data/records/confluent-<codec>.bin (+ .json sidecars).
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

from confluent_kafka import Producer

from moldau.protocol.framing import FrameDecoder
from moldau.protocol.generated import (
    ApiVersionsResponse,
    InitProducerIdResponse,
    MetadataResponse,
    ProduceResponse,
)
from moldau.protocol.generated.api import APIS
from moldau.protocol.headers import decode_request, encode_response

OUT = Path(__file__).resolve().parent / "records"
TOPIC = "capture"
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
LEGACY_CODECS = ["none", "gzip", "snappy"]
# API version ceilings the stand-in advertises. librdkafka picks the message format from
# them: magic 2 needs Produce >= 3 and Fetch >= 4; magic 1 needs Produce/Fetch >= 2;
# it only uses lz4 when the broker also lists FindCoordinator.
MAGIC_2 = {18: 3, 3: 12, 0: 9, 1: 12, 22: 4, 10: 4}
MAGIC_1 = {18: 2, 3: 2, 0: 2, 1: 2}
MAGIC_0 = {18: 0, 3: 0, 0: 1, 1: 1}


def sample_records() -> list[dict]:
    """The records produced for every codec: keys, null key and value, headers, unicode."""
    records = []
    for i in range(20):
        records.append(
            {
                "key": f"key-{i}" if i % 5 else None,
                "value": ("value-" + "é" * (i % 3) + str(i) * 30) if i != 7 else None,
                "headers": [["trace", f"t{i}"], ["empty", None]] if i % 4 == 0 else [],
            }
        )
    return records


class StandInBroker:
    """Just enough of a broker for one producer: one topic, one partition, node 1."""

    def __init__(self, served: dict[int, int]) -> None:
        self.served = served
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.captured: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            conn, _ = self.server.accept()
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        frames = FrameDecoder()
        with conn:
            while data := conn.recv(1 << 20):
                for payload in frames.feed(data):
                    header, body = decode_request(payload)
                    reply = self._answer(header.request_api_key, header.request_api_version, body)
                    conn.sendall(
                        encode_response(
                            header.correlation_id,
                            header.request_api_key,
                            header.request_api_version,
                            reply,
                        )
                    )

    def _answer(self, key: int, version: int, body: object) -> object:
        if key == 18:
            return ApiVersionsResponse(
                api_keys=[
                    ApiVersionsResponse.ApiVersion(
                        api_key=k, min_version=APIS[k].min_version, max_version=v
                    )
                    for k, v in self.served.items()
                ]
            )
        if key == 3:
            r = MetadataResponse
            return r(
                brokers=[r.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port)],
                cluster_id="capture",
                controller_id=1,
                topics=[
                    r.MetadataResponseTopic(
                        name=TOPIC,
                        partitions=[
                            r.MetadataResponsePartition(
                                partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                            )
                        ],
                    )
                ],
            )
        if key == 22:
            return InitProducerIdResponse(producer_id=4242, producer_epoch=0)
        if key == 0:
            p = ProduceResponse
            topics = []
            for topic in body.topic_data:
                parts = []
                for part in topic.partition_data:
                    self.captured.append(bytes(part.records))
                    parts.append(p.PartitionProduceResponse(index=part.index, base_offset=0))
                topics.append(p.TopicProduceResponse(name=topic.name, partition_responses=parts))
            return p(responses=topics)
        raise ValueError(f"stand-in broker got unexpected API key {key}")


def capture(codec: str, records: list[dict], served: dict[int, int]) -> bytes:
    broker = StandInBroker(served)
    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{broker.port}",
            "compression.type": codec,
            "enable.idempotence": served is MAGIC_2,
            "linger.ms": 100,  # one batch for all records
        }
    )
    for r in records:
        headers = [(k, None if v is None else v.encode()) for k, v in r["headers"]]
        if served is not MAGIC_2:
            headers = []  # legacy message sets cannot carry headers
        producer.produce(
            TOPIC,
            key=None if r["key"] is None else r["key"].encode(),
            value=None if r["value"] is None else r["value"].encode(),
            headers=headers or None,
            partition=0,
            timestamp=1_700_000_000_000 + len(broker.captured),
        )
    remaining = producer.flush(20)
    if remaining or len(broker.captured) != 1:
        raise RuntimeError(f"{codec}: {remaining} unsent, {len(broker.captured)} batches seen")
    return broker.captured[0]


def save(name: str, codec: str, blob: bytes, records: list[dict]) -> None:
    print(f"{name}: {len(blob)} bytes, magic {blob[16]}")
    (OUT / f"{name}.bin").write_bytes(blob)
    sidecar = {
        "producer": "confluent-kafka (librdkafka)",
        "codec": codec,
        "magic": blob[16],
        "count": len(records),
        "records": records,
    }
    (OUT / f"{name}.json").write_text(json.dumps(sidecar, indent=1, ensure_ascii=False) + "\n")


def main() -> None:
    OUT.mkdir(exist_ok=True)
    records = sample_records()
    for codec in CODECS:
        save(f"confluent-{codec}", codec, capture(codec, records, MAGIC_2), records)
    legacy = [dict(r, headers=[]) for r in records]
    for magic, served in ((0, MAGIC_0), (1, MAGIC_1)):
        for codec in LEGACY_CODECS:
            blob = capture(codec, legacy, served)
            save(f"confluent-magic{magic}-{codec}", codec, blob, legacy)


if __name__ == "__main__":
    main()
