"""kafka-server-start.sh / kafka-server-stop.sh: a broker started as a daemon with Kafka's
command line registers, serves, and stops on SIGTERM from kafka-server-stop.sh
--node-id (never the bare form here: it stops every broker on the host)."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import time
import urllib.request
import uuid
from typing import Any

from moldau.devcluster.brokers import free_port
from moldau.tools.server_scripts import broker_pids

from .toolrun import run, wait_for


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_start_as_daemon_then_stop_by_node_id(tmp_path, zk_ensemble: Any) -> None:
    node_id = str(random.randint(500, 999))  # unique on a host shared with other tests
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text("\n".join([
        f"broker.id={node_id}", f"listeners=PLAINTEXT://127.0.0.1:{port}",
        f"log.dirs={tmp_path / 'data'}",
        f"zookeeper.connect={zk_ensemble.connect_string}/start-{uuid.uuid4().hex[:8]}",
        "offsets.topic.replication.factor=1"]) + "\n")
    usage = run("kafka-server-start.sh")
    assert (usage.code, usage.out) == (
        1, "USAGE: kafka-server-start.sh [-daemon] server.properties "
           "[--override property=value]*\n")
    # an operator's JMX_PORT names the port of Moldau's JSON metrics (issue 41, item 5)
    jmx_port = free_port()
    os.environ.update(LOG_DIR=str(tmp_path / "logs"), JMX_PORT=str(jmx_port))
    try:
        started = run("kafka-server-start.sh", "-daemon", str(config),
                      "--override", "num.partitions=2")
    finally:
        del os.environ["LOG_DIR"], os.environ["JMX_PORT"]
    assert started.code == 0, started.err
    try:
        wait_for(lambda: _accepts(port), what="the daemon's listener")
        assert len(wait_for(lambda: broker_pids(node_id), what="the broker process")) == 1
        topics = run("kafka-topics.sh", "--bootstrap-server", f"127.0.0.1:{port}",
                     "--create", "--topic", "started")
        assert topics.out == "Created topic started.\n", topics.err
        described = run("kafka-topics.sh", "--bootstrap-server", f"127.0.0.1:{port}",
                        "--describe", "--topic", "started")
        assert "PartitionCount: 2" in described.out  # the --override took effect
        console = (tmp_path / "logs" / "kafkaServer.out").read_text()
        assert f"JMX_PORT={jmx_port}: Moldau has no JMX; it serves its metrics as JSON on " \
            f"http://127.0.0.1:{jmx_port}/jmx instead" in console
        with urllib.request.urlopen(f"http://127.0.0.1:{jmx_port}/jmx?qry=kafka.server:"
                                    "type=ReplicaManager,*", timeout=10) as answer:
            assert json.load(answer)["beans"], "no ReplicaManager MBean on the JMX_PORT"
        stopped = run("kafka-server-stop.sh", f"--node-id={node_id}")
        assert stopped.code == 0, stopped.out + stopped.err
        wait_for(lambda: not broker_pids(node_id), what="the broker to exit")
        assert not _accepts(port)
        assert "shut down completed" in (tmp_path / "logs" / "server.log").read_text()
        again = run("kafka-server-stop.sh", f"--node-id={node_id}")
        assert (again.code, again.out) == (1, "No kafka server to stop\n")
    finally:
        for leftover in broker_pids(node_id):
            os.kill(leftover, signal.SIGKILL)
            time.sleep(0.1)


def test_a_bad_config_fails_the_foreground_start(tmp_path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("broker.id=not-a-number\n")
    os.environ["LOG_DIR"] = str(tmp_path / "logs")  # not ./logs of the checkout
    try:
        out = run("kafka-server-start.sh", str(config))
    finally:
        del os.environ["LOG_DIR"]
    assert out.code == 1 and "broker.id" in out.err, (out.out, out.err)
