"""The durability checker against one real Moldau broker: a clean run is ok, and records
removed behind the checker's back (DeleteRecords) are reported lost."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from broker_process import start_broker
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from moldau.checker.cli import create_topic
from moldau.checker.consumer import verify
from moldau.checker.producer import ProducerRun
from moldau.cli import main
from moldau.devcluster.brokers import BrokerProcess

BROKER_PROPERTIES = {
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory, zk_ensemble.connect_string, BROKER_PROPERTIES)
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM\n{process.tail()}"


def test_checker_command_on_a_healthy_broker_is_ok(broker, tmp_path, capsys):
    report_file = tmp_path / "report.json"
    code = main(["checker", "--bootstrap-server", broker.bootstrap, "--topic", "durable",
                 "--create", "--partitions", "3", "--replication-factor", "1",
                 "--min-insync-replicas", "1", "--duration", "3", "--rate", "200",
                 "--record-size", "200", "--read-timeout", "15", "--quiet",
                 "--report-file", str(report_file)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1] == "RESULT: OK"
    report = json.loads(report_file.read_text())
    totals = report["totals"]
    assert report["ok"] is True
    assert all(p["read_complete"] for p in report["partitions"])
    assert totals["acknowledged"] > 100  # ~600 at 200/s for 3 s
    assert totals["acknowledged"] == totals["sent"]  # nothing failed or in doubt here
    assert totals["read"] == totals["acknowledged"]
    assert totals["lost"] == totals["duplicated"] == totals["out_of_order"] == 0
    assert [p["partition"] for p in report["partitions"]] == [0, 1, 2]
    assert all(p["acknowledged"] > 0 for p in report["partitions"])


def test_records_deleted_after_acknowledgement_are_reported_lost(broker):
    assert create_topic(broker.bootstrap, "deleted", 1, 1, 1)
    run = ProducerRun(broker.bootstrap, "deleted", rate=None, max_records=50)
    writes = run.run(duration=10)
    assert len(writes[0].acknowledged) == 50
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    deleted = admin.delete_records([TopicPartition("deleted", 0, 10)])
    assert next(iter(deleted.values())).result(timeout=10).low_watermark == 10

    report = verify(run, timeout=15)
    p = report.partitions[0]
    assert not report.ok
    assert p.lost == list(range(10))
    assert report.lost == 10
    assert p.read_complete and p.start_offset == 10 and p.end_offset == 50
    assert p.read == 40 and not p.duplicated and not p.out_of_order
    assert "lost sequences 0-9" in report.summary()
