"""The access role as playbooks/access.yml runs it (the broker role's sasl_users.yml
including roles/access), on the control node against a real ZooKeeper: `--check --diff`
shows what would be added and writes nothing, a run applies and reports changed and
writes the drift report, a second run reports no change, and an invalid ACL fails the
play with Kafka's message and writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from moldau.authorizer.acl_store import AclStore
from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = REPO / ".venv-deploy" / "bin" / "ansible-playbook"
READ_ORDERS = {"principal": "User:alice", "operation": "Read", "permission": "Allow",
               "resource_type": "Topic", "resource_name": "orders"}


def inventory(tmp_path: Path, connect: str, acls: list[dict[str, str]]) -> Path:
    """One local "broker" whose venv is the test's interpreter (moldau installed)."""
    venv_bin = tmp_path / "install" / "venv" / "bin"
    venv_bin.mkdir(parents=True, exist_ok=True)
    python = venv_bin / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    (tmp_path / "conf").mkdir(exist_ok=True)
    settings: dict[str, Any] = {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "broker_install_dir": str(tmp_path / "install"), "broker_conf_dir": str(tmp_path / "conf"),
        "broker_zookeeper_connect": connect,
        "broker_listeners": {"SASL_PLAINTEXT": {"port": 9094, "protocol": "SASL_PLAINTEXT",
                                                "mechanisms": ["SCRAM-SHA-512"]}},
        "broker_inter_broker_listener": "SASL_PLAINTEXT",
        "broker_sasl_inter_broker_password": "broker-secret",
        "broker_sasl_admin_password": "admin-secret",
        "broker_sasl_users": [{"name": "alice", "password": "alice-secret"}],
        "kafka_acls": acls,
        "kafka_quotas": [{"entity": {"user": "alice"},
                          "config": {"producer_byte_rate": 1048576}}]}
    path = tmp_path / "hosts.yml"
    path.write_text(json.dumps({"all": {"children": {"brokers": {"hosts": {
        "local-broker": settings}}}}}), encoding="utf-8")  # YAML reads JSON
    return path


def play(hosts: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.fail(f"{ANSIBLE_PLAYBOOK} missing: run `make deploy-deps` first")
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_STRATEGY="linear")
    return subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", str(hosts), *flags,
                           str(REPO / "playbooks" / "access.yml")],
                          capture_output=True, text=True, env=env, timeout=300, check=False,
                          cwd=REPO)


def recap(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return next(line for line in done.stdout.splitlines() if line.startswith("local-broker"))


def test_check_diff_then_apply_then_no_change(zk_single: ZooKeeperEnsemble,
                                              tmp_path: Path) -> None:
    connect = f"{zk_single.connect_string}/role-{uuid.uuid4().hex[:8]}"
    hosts = inventory(tmp_path, connect, [READ_ORDERS])
    zk = KafkaZkClient(connect)
    zk.start()
    try:
        checked = play(hosts, "--check", "--diff")
        assert "changed=2" in recap(checked)  # would apply, would write the drift report
        assert '"resource_name": "orders"' in checked.stdout  # what would be added
        assert "alice-secret" not in checked.stdout + checked.stderr
        assert AclStore(zk.kazoo).read_all() == {} and zk.get_user_config("alice") == {}

        applied = play(hosts)
        assert "changed=0" not in recap(applied)
        assert len(AclStore(zk.kazoo).read_all()) == 1
        assert zk.get_user_config("alice")["producer_byte_rate"] == "1048576"
        drift = json.loads((tmp_path / "conf" / "access-drift.json").read_text())
        assert drift == {"acls": [], "quotas": [], "users": []}

        assert "changed=0" in recap(play(hosts))
    finally:
        zk.close()


def test_an_invalid_acl_fails_the_play_and_writes_nothing(zk_single: ZooKeeperEnsemble,
                                                          tmp_path: Path) -> None:
    connect = f"{zk_single.connect_string}/role-{uuid.uuid4().hex[:8]}"
    bad = {**READ_ORDERS, "resource_type": "Cluster", "resource_name": "prod",
           "operation": "Alter"}
    done = play(inventory(tmp_path, connect, [READ_ORDERS, bad]))
    assert done.returncode != 0
    assert "The only valid name for the CLUSTER resource is kafka-cluster" in done.stdout
    assert "alice-secret" not in done.stdout + done.stderr
    zk = KafkaZkClient(connect)
    zk.start()
    try:
        assert not zk.exists("/kafka-acl") and not zk.exists("/config/users")
    finally:
        zk.close()
