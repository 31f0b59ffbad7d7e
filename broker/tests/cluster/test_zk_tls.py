"""TLS to ZooKeeper (`zookeeper.ssl.*`) and `zookeeper.set.acl`, against a real ZooKeeper
serving a secure client port that requires client certificates (x509 authentication):
the client and a whole broker connect over TLS, the znodes get Kafka's secure ACLs (an
anonymous client on the plain port can read but not change them; sensitive configs it
cannot read), and bad settings fail with the key to fix while ZooKeeper keeps serving."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from tls_material import TlsMaterial, make_tls_material

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_client import KafkaZkClient, ZooKeeperUnavailableError
from moldau.cluster.zk_ensemble import ZkServerTls, ZooKeeperEnsemble
from moldau.cluster.zk_tls import StoreWatchingContext, tls_context
from moldau.devcluster.brokers import BrokerProcess
from moldau.security.ssl_settings import TlsConfigError


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("zk-tls"))


@pytest.fixture(scope="module")
def secure_zk(tmp_path_factory: pytest.TempPathFactory, tls: TlsMaterial
              ) -> Iterator[ZooKeeperEnsemble]:
    server_tls = ZkServerTls(keystore=str(tls.server_p12), truststore=str(tls.truststore_p12),
                             keystore_password=tls.store_password,
                             truststore_password=tls.store_password)
    ensemble = ZooKeeperEnsemble(tmp_path_factory.mktemp("zk-secure"), size=1, tick_time=500,
                                 die_with_parent=True, tls=server_tls)
    ensemble.start(timeout=60)
    try:
        first_handshake(ensemble, tls)
        yield ensemble
    finally:
        ensemble.stop()


def first_handshake(zk: ZooKeeperEnsemble, tls: TlsMaterial, timeout: float = 60.0) -> None:
    """A fresh ZooKeeper JVM's first TLS handshakes can take longer than a client's
    6 s session timeout on a loaded machine (a CI rehearsal saw one time out at load
    9): warm its TLS stack up once here, with time to spare, so the tests time what
    they mean to."""
    context = tls_context(client_settings(tls))
    host, port = zk.secure_connect_string.split(",")[0].split(":")
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=timeout) as plain, \
                    context.wrap_socket(plain, server_hostname=host):
                return
        except (OSError, ssl.SSLError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def client_settings(tls: TlsMaterial, **overrides: str) -> dict[str, str]:
    """A broker's zookeeper.ssl.* keys: the client certificate as PKCS12 (type from the
    .p12 suffix), the CA as PEM."""
    return {"zookeeper.ssl.client.enable": "true",
            "zookeeper.ssl.keystore.location": str(tls.client_p12),
            "zookeeper.ssl.keystore.password": tls.store_password,
            "zookeeper.ssl.truststore.location": str(tls.ca_cert),
            "zookeeper.ssl.truststore.type": "PEM", **overrides}


def secure_client(zk: ZooKeeperEnsemble, tls: TlsMaterial, chroot: str) -> KafkaZkClient:
    """A started client over TLS with secure ACLs, the broker's top-level znodes made."""
    client = KafkaZkClient(zk.secure_connect_string, chroot, session_timeout_ms=6000,
                           tls_context=tls_context(client_settings(tls)), secure_acls=True)
    client.start()
    client.ensure_persistent_paths()
    return client


def anonymous(zk: ZooKeeperEnsemble, chroot: str) -> KazooClient:
    client = KazooClient(hosts=zk.connect_string + chroot)
    client.start(timeout=15)
    return client


def test_tls_session_creates_znodes_with_kafka_secure_acls(secure_zk, tls) -> None:
    chroot = f"/acl-{uuid.uuid4().hex[:8]}"
    client = secure_client(secure_zk, tls, chroot)
    try:
        client.set_entity_config(zd.ConfigType.BROKER, "1", {"log.cleaner.threads": "2"})
        client.set_entity_config(zd.ConfigType.TOPIC, "t", {"cleanup.policy": "compact"})
        owner = client._client().get_acls(zd.BROKER_IDS_PATH)[0]
        sensitive = client._client().get_acls("/config/brokers/1")[0]
    finally:
        client.close()
    ids = {(a.id.scheme, a.id.id, a.perms) for a in owner}
    assert ids == {("x509", tls.client_dn, 31), ("world", "anyone", 1)}
    assert {(a.id.scheme, a.id.id) for a in sensitive} == {("x509", tls.client_dn)}

    plain = anonymous(secure_zk, chroot)
    try:
        assert plain.get("/config/topics/t")[0]  # world-readable
        with pytest.raises(NoAuthError):
            plain.set("/config/topics/t", b"{}")
        with pytest.raises(NoAuthError):
            plain.create(zd.BROKER_IDS_PATH + "/7", b"{}")
        with pytest.raises(NoAuthError):
            plain.get("/config/brokers/1")  # sensitive: creator only
    finally:
        plain.stop()
        plain.close()


def test_an_untrusted_server_fails_with_the_tls_error_and_zookeeper_keeps_serving(
        secure_zk, tls, tmp_path) -> None:
    other_ca = make_tls_material(tmp_path / "other")
    settings = client_settings(tls, **{"zookeeper.ssl.truststore.location":
                                       str(other_ca.ca_cert)})
    client = KafkaZkClient(secure_zk.secure_connect_string, session_timeout_ms=4000,
                           connection_timeout_ms=3000, tls_context=tls_context(settings))
    with pytest.raises(ZooKeeperUnavailableError, match="certificate verify failed"):
        client.start()
    plain = anonymous(secure_zk, "")
    try:
        assert "zookeeper" in plain.get_children("/")
    finally:
        plain.stop()
        plain.close()


def replace_file(source: Path, target: Path) -> None:
    """As a deployment tool writes a file: a new one renamed over the old."""
    staging = target.with_suffix(".new")
    shutil.copyfile(source, staging)
    os.replace(staging, target)


def test_the_broker_context_follows_its_trust_store_at_the_next_connection(
        secure_zk, tls, tmp_path) -> None:
    # A CA rotation or renewal rewrites the store files under a running broker: its next
    # ZooKeeper connection must use them. Here the trust store first holds another CA (the
    # handshake fails), then the right one arrives while the same client keeps retrying.
    other_ca = make_tls_material(tmp_path / "other")
    trust = tmp_path / "zk-trust.pem"
    shutil.copyfile(other_ca.ca_cert, trust)
    source = StoreWatchingContext.of(client_settings(
        tls, **{"zookeeper.ssl.truststore.location": str(trust)}))
    assert source is not None
    client = KafkaZkClient(secure_zk.secure_connect_string, session_timeout_ms=6000,
                           connection_timeout_ms=30000, tls_context=source)
    fixed = threading.Timer(3.0, replace_file, (tls.ca_cert, trust))
    fixed.start()
    try:
        client.start()
        assert "zookeeper" in client._client().get_children("/")
        assert client._tls_handler is not None and client._tls_handler.last_error is None
    finally:
        fixed.cancel()
        client.close()


def test_a_half_written_store_keeps_the_last_good_context(tls, tmp_path) -> None:
    trust = tmp_path / "zk-trust.pem"
    shutil.copyfile(tls.ca_cert, trust)
    source = StoreWatchingContext.of(client_settings(
        tls, **{"zookeeper.ssl.truststore.location": str(trust)}))
    assert source is not None
    first = source()
    assert source() is first  # unchanged files: no rebuild
    staging = tmp_path / "cut.pem"
    staging.write_bytes(tls.ca_cert.read_bytes()[:40])
    os.replace(staging, trust)
    assert source() is first  # unreadable: the last good context stays
    replace_file(tls.ca_cert, trust)
    assert source() is not first  # readable again: rebuilt


@pytest.mark.parametrize(("override", "key", "words"), [
    ({"zookeeper.ssl.keystore.password": "wrong"}, "zookeeper.ssl.keystore.password",
     "wrong password"),
    ({"zookeeper.ssl.truststore.type": ""}, "zookeeper.ssl.truststore.type",
     "zookeeper.ssl.truststore.type=PEM"),
    ({"zookeeper.ssl.keystore.location": "/nonexistent/client.p12"},
     "zookeeper.ssl.keystore.location", "/nonexistent/client.p12"),
    ({"zookeeper.ssl.protocol": "TLSv9"}, "zookeeper.ssl.protocol", "TLSv9"),
])
def test_bad_settings_name_the_zookeeper_key(tls, override, key, words) -> None:
    settings = {k: v for k, v in client_settings(tls, **override).items() if v != ""}
    with pytest.raises(TlsConfigError) as caught:
        tls_context(settings)
    assert caught.value.key == key
    assert words in str(caught.value)


def test_broker_registers_over_tls_with_secure_acls_and_serves_clients(
        secure_zk, tls, tmp_path) -> None:
    from confluent_kafka import Consumer, Producer

    chroot = f"/broker-{uuid.uuid4().hex[:8]}"
    props = {**client_settings(tls), "zookeeper.set.acl": "true", "num.partitions": "1"}
    broker = BrokerProcess(str(tmp_path / "b"), 1, secure_zk.secure_connect_string + chroot,
                           properties=props)
    broker.start(wait=60)
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(10):
            producer.produce("zk-tls", f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "zk-tls",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["zk-tls"])
        values = []
        while len(values) < 10:
            message = consumer.poll(20)
            assert message is not None, values
            assert message.error() is None, message.error()
            values.append(message.value())
        consumer.close()
        assert values == [f"v{i}".encode() for i in range(10)]
    finally:
        assert broker.stop() == 0
    plain = anonymous(secure_zk, chroot)
    try:
        acls, _ = plain.get_acls("/brokers/topics/zk-tls")
        assert {(a.id.scheme, a.id.id) for a in acls} == {("x509", tls.client_dn),
                                                          ("world", "anyone")}
        with pytest.raises(NoAuthError):
            plain.delete("/brokers/topics/zk-tls", recursive=True)
    finally:
        plain.stop()
        plain.close()


def test_set_acl_without_a_client_certificate_stops_startup(secure_zk, tmp_path) -> None:
    broker = BrokerProcess(str(tmp_path / "b"), 1, secure_zk.connect_string + "/no-cert",
                           properties={"zookeeper.set.acl": "true"})
    broker.start(wait=None)
    assert broker.process is not None
    assert broker.process.wait(60) == 1
    assert "zookeeper.set.acl" in broker.tail(50)


def test_zookeeper_shell_over_tls_shows_the_acls(secure_zk, tls, tmp_path) -> None:
    """zookeeper-shell.sh -zk-tls-config-file, as an operator checks a secured tree."""
    chroot = f"/shell-{uuid.uuid4().hex[:8]}"
    secure_client(secure_zk, tls, chroot).close()
    config = tmp_path / "zk-tls.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in client_settings(tls).items()))
    shell = str(Path(sys.executable).parent / "zookeeper-shell.sh")
    done = subprocess.run([shell, secure_zk.secure_connect_string + chroot,
                           "-zk-tls-config-file", str(config), "getAcl", "/brokers/ids"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-4:] == [f"'x509,'{tls.client_dn}", ": cdrwa",
                                             "'world,'anyone", ": r"]
    denied = subprocess.run([shell, secure_zk.connect_string + chroot, "delete",
                             "/brokers/ids"], capture_output=True, text=True, timeout=60)
    assert (denied.returncode, denied.stderr) == (1, "Insufficient permission : /brokers/ids\n")


def test_zookeeper_shell_names_an_unreadable_tls_config(secure_zk, tmp_path) -> None:
    shell = str(Path(sys.executable).parent / "zookeeper-shell.sh")
    missing = tmp_path / "missing.properties"
    done = subprocess.run([shell, secure_zk.secure_connect_string, "-zk-tls-config-file",
                           str(missing), "ls", "/"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and str(missing) in done.stderr and done.stdout == ""
