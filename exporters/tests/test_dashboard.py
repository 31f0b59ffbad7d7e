"""The Grafana dashboard (roles/monitoring/files/dashboards) is what the generator makes,
and every name its expressions query is served by a real scrape: the broker exporter
over a real broker, the lag exporter over a real consumer group, the ZooKeeper exporter
over the real ensemble."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from moldau_exporters.broker_exporter import default_rules, scrape
from moldau_exporters.dashboard import dashboard, queried_names
from moldau_exporters.lag_exporter import collect
from moldau_exporters.zookeeper_exporter import (
    four_letter_word,
    parse_conf,
    parse_mntr,
    samples_from,
)

BOARD = (Path(__file__).resolve().parents[2] / "roles" / "monitoring" / "files" / "dashboards"
         / "moldau-overview.json")


def test_the_committed_dashboard_is_the_generated_one() -> None:
    assert json.loads(BOARD.read_text()) == dashboard(), \
        "run: python -m moldau_exporters.dashboard > " + str(BOARD)


def names_in(text: str) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines()
            if line and not line.startswith("#")}


def test_every_name_the_dashboard_queries_is_served(broker, zk_ensemble) -> None:
    process, metrics_port = broker
    config = {"bootstrap.servers": process.bootstrap}
    topic, group = f"board-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    producer = Producer({**config, "acks": "all"})
    producer.produce(topic, b"one")
    assert producer.flush(20) == 0
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    message = None
    while message is None and time.monotonic() < deadline:
        message = consumer.poll(0.5)
    assert message is not None and not message.error()
    consumer.commit(message=message, asynchronous=False)
    try:
        served = names_in(scrape(f"http://127.0.0.1:{metrics_port}", default_rules()))
        served |= {s.name for s in collect(config)}
    finally:
        consumer.close()
    port = zk_ensemble.client_ports[0]
    server_id = parse_conf(four_letter_word("127.0.0.1", port, "conf"))["serverId"]
    served |= {s.name for s in samples_from(
        parse_mntr(four_letter_word("127.0.0.1", port, "mntr")), server_id, native=False)}
    missing = sorted(queried_names(dashboard()) - served)
    assert missing == [], f"the dashboard queries names no exporter serves: {missing}"
