"""The broker role's scripts (roles/broker/files) against a real ZooKeeper that requires
SASL DIGEST-MD5, as the zookeeper role sets it up: they log in with the KAFKA_OPTS of the
broker role's environment file beside server.properties, as the running broker does
(without it ZooKeeper refuses them), and
`moldau_ops.py unsecured-znodes sasl` (playbooks/zookeeper-sasl.yml's check) lists the
znodes zookeeper-security-migration has yet to re-ACL, and none once it ran."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "broker" / "files"))

import moldau_health
import moldau_ops
from zk_fixtures import running_ensemble

from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.cluster.zk_server_security import ZkServerSasl

USER, PASSWORD = "kafka", "zk-secret"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def sasl_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    yield from running_ensemble(tmp_path_factory, 1, ZkServerSasl({USER: PASSWORD}))


@pytest.fixture
def broker_files(sasl_zk: ZooKeeperEnsemble, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """server.properties, the JAAS Client section and moldau-broker.env as the broker role
    writes them; a controller and a topic written anonymously-ACLed (world: everything)
    before the move, through a SASL session."""
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    connect = f"{sasl_zk.connect_string}/sasl-{uuid.uuid4().hex[:8]}"
    jaas = tmp_path / "zookeeper-client-jaas.conf"
    jaas.write_text("Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                    f'    username="{USER}"\n    password="{PASSWORD}";\n}};\n')
    kafka_opts = f"-Djava.security.auth.login.config={jaas}"
    (tmp_path / moldau_health.ENV_FILE).write_text(f'KAFKA_OPTS="{kafka_opts}"\n')
    properties = tmp_path / "server.properties"
    properties.write_text(f"broker.id=1\nzookeeper.connect={connect}\n")
    sasl = {"mechanism": "DIGEST-MD5", "username": USER, "password": PASSWORD}
    root = KazooClient(hosts=sasl_zk.connect_string, sasl_options=dict(sasl))
    root.start(timeout=15)
    root.ensure_path(connect[len(sasl_zk.connect_string):])
    root.stop()
    root.close()
    zk = KazooClient(hosts=connect, sasl_options=dict(sasl))
    zk.start(timeout=15)
    zk.create("/controller", b'{"version":1,"brokerid":1,"timestamp":"1"}')
    zk.create("/brokers/topics/t", b'{"partitions":{"0":[1]}}', makepath=True)
    zk.stop()
    zk.close()
    yield properties, kafka_opts


def test_the_scripts_log_in_with_the_brokers_environment_file(broker_files, capsys) -> None:
    properties, _ = broker_files
    assert moldau_health.main([str(properties), "--controller"]) == 0
    assert capsys.readouterr().out.strip() == "1"


def test_unsecured_znodes_until_the_migration_tool_ran(broker_files, capsys) -> None:
    properties, kafka_opts = broker_files
    assert moldau_ops.main([str(properties), "unsecured-znodes", "sasl"]) == 1
    listed = capsys.readouterr().out.split()
    assert "/brokers/topics/t" in listed and "/brokers" in listed and "/" in listed
    connect = properties.read_text().split("zookeeper.connect=")[1].strip()
    done = subprocess.run([str(BIN / "zookeeper-security-migration"), "--zookeeper.acl=secure",
                           "--zookeeper.connect", connect],
                          env=dict(os.environ, KAFKA_OPTS=kafka_opts), capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert moldau_ops.main([str(properties), "unsecured-znodes", "sasl"]) == 0
    assert capsys.readouterr().out.strip() == "every znode gives sasl every right"


def test_without_the_environment_file_zookeeper_refuses_them(broker_files, capsys) -> None:
    properties, _ = broker_files
    (properties.parent / moldau_health.ENV_FILE).unlink()
    assert moldau_health.main([str(properties), "--controller"]) == 2
    out = capsys.readouterr().out
    assert "requires SASL authentication and this client has no SASL login" in out, out
