"""Several brokers per server (broker_instance): the broker role's names, unit,
server.properties and logrotate file for each broker host, rendered by Ansible itself on
the control node (tests/deploy/files/instance_layout.yml, connection local, nothing
installed), against the single-broker layout, which must stay exactly what it was."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_inventory_validation import ANSIBLE_PLAYBOOK, REPO

PLAYBOOK = REPO / "tests" / "deploy" / "files" / "instance_layout.yml"
COMMON = {"ansible_connection": "local", "broker_address": "10.0.0.1",
          "broker_zookeeper_connect": "zk:2181/moldau", "ansible_managed": "managed",
          "broker_listeners": {"PLAINTEXT": {
              "port": "{{ 9092 + 100 * (broker_instance | int - 1) }}", "protocol": "PLAINTEXT"}}}
# two servers of two brokers each (hosts listed out of server order), one server of one
SERVERS = {
    "a1": {"ansible_host": "srv-a", "broker_instance": 1, "broker_id": 1,
           "broker_cpu_affinity": "0-3", "broker_metrics_port": 9999},
    "b2": {"ansible_host": "srv-b", "broker_instance": 2, "broker_id": 4,
           "broker_metrics_port": 10099},
    "a2": {"ansible_host": "srv-a", "broker_instance": 2, "broker_id": 2,
           "broker_cpu_affinity": "4-7", "broker_metrics_port": 10099},
    "b1": {"ansible_host": "srv-b", "broker_instance": 1, "broker_id": 3,
           "broker_metrics_port": 9999},
}


def render(tmp_path: Path, brokers: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.fail(f"{ANSIBLE_PLAYBOOK} missing: run `make deploy-deps` first")
    out = tmp_path / "out"
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"vars": {**COMMON, "layout_out": str(out)},
                                             "children": {"brokers": {"hosts": brokers}}}}))
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STRATEGY="linear",
               ANSIBLE_PYTHON_INTERPRETER=str(ANSIBLE_PLAYBOOK.parent / "python"))
    done = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(PLAYBOOK)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    files = ("unit", "server.properties", "logrotate")
    return {host: {"names": json.loads((out / host / "names.json").read_text()),
                   **{f: (out / host / f).read_text() for f in files}}
            for host in brokers}


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    brokers = {**SERVERS, "solo": {"broker_id": 5, "broker_listeners": {
        "PLAINTEXT": {"port": 9092, "protocol": "PLAINTEXT"}}}}
    return render(tmp_path_factory.mktemp("layout"), brokers)


def test_each_instance_has_its_own_names_and_directories(layout) -> None:
    a2 = layout["a2"]["names"]
    assert a2["service"] == "moldau-broker@2"
    assert a2["unit_file"] == "/etc/systemd/system/moldau-broker@2.service.d/instance.conf"
    assert (a2["home"], a2["conf"], a2["log_dir"]) == (
        "/var/lib/moldau/broker-2", "/etc/moldau/broker-2", "/var/log/moldau/broker-2")
    assert a2["log_dirs"] == ["/var/lib/moldau/broker-2/data"]
    assert (a2["env"], a2["jaas"]) == ("/etc/moldau/broker-2/moldau-broker.env",
                                       "/etc/moldau/broker-2/zookeeper-client-jaas.conf")
    assert a2["logrotate"] == "/etc/logrotate.d/moldau-broker-2"
    # the server's own: one venv, one service user's home
    assert (a2["install"], a2["user_home"]) == ("/opt/moldau", "/var/lib/moldau")
    names = [layout[h]["names"] for h in SERVERS]
    for field in ("conf", "log_dir", "home", "logrotate"):
        per_server = {(SERVERS[h]["ansible_host"], layout[h]["names"][field]) for h in SERVERS}
        assert len(per_server) == len(names), field


def test_one_first_host_per_server_does_the_servers_work(layout) -> None:
    """The first host of the play on each server installs and makes the user, so two
    instances never race for the venv or for useradd."""
    assert {h: layout[h]["names"]["leader"] for h in SERVERS} == {
        "a1": "a1", "a2": "a1", "b2": "b2", "b1": "b2"}
    assert [h for h in SERVERS if layout[h]["names"]["first"]] == ["a1", "b2"]
    assert layout["solo"]["names"]["first"]


def test_the_instance_drop_in_carries_what_the_instance_runs(layout) -> None:
    unit = layout["a2"]["unit"]
    lines = unit.splitlines()
    assert ("ExecStart=/opt/moldau/venv/bin/moldau-server /etc/moldau/broker-2/server.properties"
            in lines)
    assert "Environment=LOG_DIR=/var/log/moldau/broker-2" in lines
    assert "Environment=MOLDAU_METRICS_PORT=10099" in lines
    assert "WorkingDirectory=/var/lib/moldau/broker-2" in lines
    assert "CPUAffinity=4-7" in lines
    assert "LimitNOFILE=100000" in lines
    # the template unit moldau-broker@.service has the [Install]; no alias for an instance
    assert "[Install]" not in unit and "Alias=kafka.service" not in unit
    assert "CPUAffinity" not in layout["b1"]["unit"]


def test_the_template_unit_has_nothing_of_one_instance() -> None:
    template = (REPO / "systemd" / "moldau-broker@.service").read_text()
    assert "{{" not in template and "%i" in template
    assert "WantedBy=multi-user.target" in template and "Alias=" not in template.replace(
        "No kafka.service alias", "")


def test_server_properties_names_the_server_and_the_instances_ports(layout) -> None:
    for host, port, server in (("a1", 9092, "srv-a"), ("a2", 9192, "srv-a"), ("b2", 9192, "srv-b")):
        lines = layout[host]["server.properties"].splitlines()
        assert f"moldau.broker.host={server}" in lines
        assert f"listeners=PLAINTEXT://0.0.0.0:{port}" in lines
        assert f"log.dirs=/var/lib/moldau/broker-{SERVERS[host]['broker_instance']}/data" in lines


def test_logrotate_covers_the_instances_log_dir(layout) -> None:
    rotate = layout["b2"]["logrotate"]
    assert "/var/log/moldau/broker-2/server.log" in rotate
    assert "/var/log/moldau/server.log" not in rotate


def test_a_single_broker_server_keeps_todays_layout(layout) -> None:
    """No broker_instance: moldau-broker.service with its kafka.service alias, the
    directories of before, and no moldau.broker.host."""
    solo = layout["solo"]
    assert solo["names"] == {
        "service": "moldau-broker", "home": "/var/lib/moldau", "conf": "/etc/moldau",
        "log_dir": "/var/log/moldau", "log_dirs": ["/var/lib/moldau/data"],
        "env": "/etc/moldau/moldau-broker.env", "jaas": "/etc/moldau/zookeeper-client-jaas.conf",
        "logrotate": "/etc/logrotate.d/moldau-broker", "user_home": "/var/lib/moldau",
        "install": "/opt/moldau", "first": True, "leader": "solo",
        "unit_file": "/etc/systemd/system/moldau-broker.service"}
    unit = solo["unit"]
    assert unit.splitlines()[-3:] == [
        "[Install]", "WantedBy=multi-user.target", "Alias=kafka.service"]
    assert "Description=Moldau broker 5 (Kafka-compatible)" in unit
    assert "moldau.broker.host" not in solo["server.properties"]
