"""playbooks/enable-authorizer.yml's preflight and the broker role's authorizer lines.

The preflight runs on the control node from inventory variables alone (the hosts below
do not exist): without broker_authorizer_enabled, or with a broker principal missing from
broker_super_users, the playbook stops there, naming what to set, before any host is
contacted. With the SASL principals listed it gets past the check and only then fails,
unreachable. server.properties.j2 is rendered with the deploy venv's Jinja as Ansible
renders it (trim_blocks) to show the two keys appear only with the authorizer on."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = REPO / ".venv-deploy" / "bin" / "ansible-playbook"

SASL_INVENTORY: dict[str, Any] = {"all": {
    "vars": {
        "ansible_connection": "community.docker.docker",
        "broker_listeners": {
            "PLAINTEXT": {"port": 9092, "protocol": "PLAINTEXT"},
            "SASL_PLAINTEXT": {"port": 9094, "protocol": "SASL_PLAINTEXT",
                               "mechanisms": ["SCRAM-SHA-512"]}},
        "broker_inter_broker_listener": "SASL_PLAINTEXT",
        "broker_sasl_inter_broker_mechanism": "SCRAM-SHA-512",
        "broker_sasl_inter_broker_password": "broker-secret",
        "broker_sasl_admin_password": "admin-secret",
        "broker_admin_listener_name": "SASL_PLAINTEXT",
        "broker_authorizer_enabled": True,
        "broker_super_users": ["User:admin"],
    },
    "children": {
        "zookeeper": {"hosts": {"nohost-zk1": {"zookeeper_id": 1,
                                               "moldau_host_address": "10.9.9.11"}}},
        "brokers": {"hosts": {f"nohost-b{i}": {"broker_id": i,
                                               "moldau_host_address": f"10.9.9.2{i}"}
                              for i in (1, 2, 3)}},
    }}}


def run_enable_authorizer(tmp_path: Path, inventory: dict[str, Any]) -> str:
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.fail(f"{ANSIBLE_PLAYBOOK} missing: run `make deploy-deps` first")
    path = tmp_path / "hosts.yml"
    path.write_text(json.dumps(inventory), encoding="utf-8")  # YAML reads JSON
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_STRATEGY="linear")
    done = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", str(path),
                           str(REPO / "playbooks" / "enable-authorizer.yml")],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode != 0, done.stdout  # the hosts do not exist
    return done.stdout + done.stderr


def test_an_inventory_without_the_authorizer_is_refused(tmp_path: Path) -> None:
    inventory = copy.deepcopy(SASL_INVENTORY)
    del inventory["all"]["vars"]["broker_authorizer_enabled"]
    output = run_enable_authorizer(tmp_path, inventory)
    assert "set broker_authorizer_enabled: true" in output
    assert "UNREACHABLE" not in output


def test_a_broker_principal_missing_from_super_users_is_named(tmp_path: Path) -> None:
    output = run_enable_authorizer(tmp_path, SASL_INVENTORY)
    assert ("as User:admin, User:broker; add User:broker to broker_super_users"
            in output), output[-3000:]
    assert "UNREACHABLE" not in output


def test_with_the_principals_listed_the_preflight_passes(tmp_path: Path) -> None:
    inventory = copy.deepcopy(SASL_INVENTORY)
    inventory["all"]["vars"]["broker_super_users"] = ["User:broker", "User:admin"]
    output = run_enable_authorizer(tmp_path, inventory)
    assert "to broker_super_users" not in output
    assert "Every ZooKeeper member is in the quorum" in output  # the next play ran


RENDER = """
import json, sys
import jinja2
env = jinja2.Environment(loader=jinja2.FileSystemLoader(sys.argv[1]), trim_blocks=True,
                         undefined=jinja2.StrictUndefined)
env.filters["bool"] = lambda value: str(value).lower() in ("true", "yes", "1")  # Ansible's
print(env.get_template("server.properties.j2").render(json.load(sys.stdin)), end="")
"""


def render_server_properties(**overrides: Any) -> str:
    variables: dict[str, Any] = {
        "ansible_managed": "managed", "broker_id": 1, "broker_rack": "",
        "broker_listeners": {"SSL": {"port": 9093, "protocol": "SSL"}},
        "broker_address": "10.0.0.1", "broker_inter_broker_listener": "SSL",
        "broker_log_dirs": ["/data"], "broker_zookeeper_connect": "zk:2181/moldau",
        "broker_tls_enabled": False, "broker_sasl_listeners": [],
        "broker_authorizer_enabled": False, "broker_super_users": [],
        "broker_cluster_properties": {}, "broker_custom_properties": {}, **overrides}
    python = ANSIBLE_PLAYBOOK.parent / "python"
    done = subprocess.run([str(python), "-c", RENDER, str(REPO / "roles/broker/templates")],
                          input=json.dumps(variables), capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout


def test_server_properties_carries_the_authorizer_only_when_enabled() -> None:
    off = render_server_properties(broker_super_users=["User:CN=b1"])
    assert "authorizer.class.name" not in off and "super.users" not in off
    on = render_server_properties(broker_authorizer_enabled=True,
                                  broker_super_users=["User:CN=b1", "User:admin"])
    lines = on.splitlines()
    assert "authorizer.class.name=kafka.security.authorizer.AclAuthorizer" in lines
    assert "super.users=User:CN=b1;User:admin" in lines
