"""An invalid inventory stops playbooks/site.yml in its first play (preflight), before
any host is contacted or changed. The hosts below are Docker containers that do not
exist: a check that let a bad inventory through would reach the next play and fail
there as UNREACHABLE instead of with the expected message. The valid inventory is the
control: it passes preflight and only then fails, unreachable."""

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

VALID: dict[str, Any] = {"all": {
    "vars": {"ansible_connection": "community.docker.docker",
             "broker_listeners": {"PLAINTEXT": {"port": 9092, "protocol": "PLAINTEXT"}}},
    "children": {
        "zookeeper": {"hosts": {f"nohost-zk{i}": {"zookeeper_id": i,
                                                  "moldau_host_address": f"10.9.9.1{i}"}
                                for i in (1, 2, 3)}},
        "brokers": {"hosts": {f"nohost-b{i}": {"broker_id": i, "broker_rack": f"r{i}",
                                               "moldau_host_address": f"10.9.9.2{i}"}
                              for i in (1, 2, 3)}},
    }}}


def hosts(inv: dict[str, Any], group: str) -> dict[str, Any]:
    return inv["all"]["children"][group]["hosts"]


def run_site(tmp_path: Path, inventory: dict[str, Any] | Path,
             *extra: str) -> subprocess.CompletedProcess[str]:
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.fail(f"{ANSIBLE_PLAYBOOK} missing: run `make deploy-deps` first")
    if isinstance(inventory, Path):
        path = inventory
    else:
        path = tmp_path / "hosts.yml"
        path.write_text(json.dumps(inventory), encoding="utf-8")  # YAML reads JSON
    # Ansible's own linear strategy: these runs stop in the preflight checks on the
    # control node, where Mitogen's start-up (about a second per run) buys nothing
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_HOST_KEY_CHECKING="0",
               ANSIBLE_STRATEGY="linear")
    return subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", str(path), *extra,
                           str(REPO / "playbooks" / "site.yml")],
                          capture_output=True, text=True, env=env, timeout=300, check=False)


def mutate(change: str) -> dict[str, Any]:
    inv = copy.deepcopy(VALID)
    zk, brokers = hosts(inv, "zookeeper"), hosts(inv, "brokers")
    if change == "even ensemble":
        del zk["nohost-zk3"]
    elif change == "duplicate zookeeper id":
        zk["nohost-zk3"]["zookeeper_id"] = 1
    elif change == "zookeeper id not a number":
        zk["nohost-zk2"]["zookeeper_id"] = "two"
    elif change == "missing broker id":
        del brokers["nohost-b2"]["broker_id"]
    elif change == "duplicate broker id":
        brokers["nohost-b3"]["broker_id"] = 1
    elif change == "listener without port":
        brokers["nohost-b1"]["broker_listeners"] = {"PLAINTEXT": {"protocol": "PLAINTEXT"}}
    elif change == "ssl listener without tls":
        inv["all"]["vars"]["broker_listeners"]["SSL"] = {"port": 9093, "protocol": "SSL"}
    elif change == "tls without certificates":
        inv["all"]["vars"]["broker_listeners"]["SSL"] = {"port": 9093, "protocol": "SSL"}
        inv["all"]["vars"]["broker_tls_enabled"] = True
    elif change == "cluster settings differ":
        brokers["nohost-b2"]["broker_cluster_properties"] = {"min.insync.replicas": 1}
    elif change == "rack on some brokers only":
        del brokers["nohost-b3"]["broker_rack"]
    elif change == "acl without principal":  # roles/access's argument specs
        inv["all"]["vars"]["kafka_acls"] = [{"operation": "Read", "permission": "Allow",
                                             "resource_type": "Topic",
                                             "resource_name": "orders"}]
    elif change.startswith("monitoring "):
        inv["all"]["children"]["monitoring"] = {"hosts": {"nohost-mon": MONITORING_CHANGES[change]}}
    elif change.startswith("instances "):  # two brokers of one server (broker_instance)
        for name, number in (("nohost-b1", 1), ("nohost-b2", 0 if "number" in change else 2)):
            brokers[name].update(ansible_host="nohost-server", broker_instance=number)
        if "number" in change:
            brokers["nohost-b2"]["broker_listeners"] = {"PLAINTEXT": {"port": 9192,
                                                                      "protocol": "PLAINTEXT"}}
    elif change == "alertmanager port on a broker's listener port":
        inv["all"]["children"]["monitoring"] = {"hosts": {"nohost-b1": {}}}
        brokers["nohost-b1"]["monitoring_alertmanager_port"] = 9092
    return inv


# A monitoring host (roles/monitoring) with one bad value each.
MONITORING_CHANGES: dict[str, dict[str, Any]] = {
    "monitoring scrape interval not a duration": {"monitoring_scrape_interval": "15 seconds"},
    "monitoring alert for not a duration":
        {"monitoring_alert_for": {"UnderReplicatedPartitions": "soon"}},
    "monitoring alert for an unknown alert": {"monitoring_alert_for": {"UnderReplicated": "1m"}},
    "monitoring port not a number": {"monitoring_prometheus_port": "web"},
    "monitoring ports clash": {"monitoring_prometheus_port": 9100},
}


CASES = {
    "even ensemble": "an ensemble needs an odd number",
    "duplicate zookeeper id": "zookeeper_id must be unique",
    "zookeeper id not a number": "argument 'zookeeper_id' is of type str",
    "missing broker id": "missing required arguments: broker_id",
    "duplicate broker id": "broker_id must be unique",
    "listener without port": "listener PLAINTEXT of nohost-b1 needs a port",
    "ssl listener without tls": "an SSL listener needs broker_tls_enabled",
    "tls without certificates": "TLS needs broker_tls_keystore_file",
    "cluster settings differ": "broker_cluster_properties differ between brokers",
    "rack on some brokers only": "broker_rack is set on some brokers only",
    "acl without principal": "missing required arguments: principal found in kafka_acls",
    "monitoring scrape interval not a duration":
        "not a Prometheus duration (e.g. 15s, 1m, 1h30m): "
        "{'monitoring_scrape_interval': '15 seconds'}",
    "monitoring alert for not a duration":
        "not a Prometheus duration (e.g. 15s, 1m, 1h30m): "
        "{'monitoring_alert_for.UnderReplicatedPartitions': 'soon'}",
    "monitoring alert for an unknown alert":
        "monitoring_alert_for names no alert of the rules: ['UnderReplicated']",
    "monitoring port not a number": "argument 'monitoring_prometheus_port' is of type str",
    "monitoring ports clash": "ports must be distinct and in 1-65535",
    "alertmanager port on a broker's listener port": "'broker listener PLAINTEXT': 9092",
    "instances of one server on one port": "need distinct broker_instance numbers (1, 2, ...) "
                                           "and distinct ports; instances ['1', '2'], ports "
                                           "[9092, 9092, 9999, 9999, 9404, 9404]",
    "instances of one server, a number below 1": "instances ['1', '0']",
}


@pytest.mark.parametrize("change", sorted(CASES))
def test_invalid_inventory_fails_before_any_host_is_touched(tmp_path: Path, change: str) -> None:
    result = run_site(tmp_path, mutate(change))
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert CASES[change] in out, out
    assert "PLAY [OS tuning]" not in out, "the play went past the inventory check:\n" + out
    assert "UNREACHABLE" not in out, out


def test_valid_inventory_passes_the_check(tmp_path: Path) -> None:
    result = run_site(tmp_path, VALID)
    out = result.stdout + result.stderr
    # Past preflight the play reaches for the (absent) hosts and stops there.
    assert "PLAY [OS tuning]" in out, out
    assert "UNREACHABLE" in out or "unreachable" in out, out
    assert result.returncode != 0


def test_valid_inventory_with_a_monitoring_host_passes_the_check(tmp_path: Path) -> None:
    inv = copy.deepcopy(VALID)
    inv["all"]["children"]["monitoring"] = {"hosts": {"nohost-mon": {
        "moldau_host_address": "10.9.9.31", "monitoring_scrape_interval": "1m30s",
        "monitoring_alert_for": {"UnderReplicatedPartitions": "1m"}}}}
    result = run_site(tmp_path, inv)
    out = result.stdout + result.stderr
    assert "PLAY [OS tuning]" in out, out
    assert result.returncode != 0


def test_production_example_passes_the_check(tmp_path: Path) -> None:
    # Its hosts are examples: over the docker connection they are unreachable at once
    # (no SSH attempt to a name that does not exist), after preflight accepted them.
    result = run_site(tmp_path, REPO / "inventories" / "production-example",
                      "-e", "ansible_connection=community.docker.docker",
                      "-e", "ansible_become=false")
    out = result.stdout + result.stderr
    assert "PLAY [OS tuning]" in out, out
    assert "WARNING: brokers per rack differ" not in out, out
    assert result.returncode != 0


def test_unequal_racks_warn_but_pass(tmp_path: Path) -> None:
    inv = copy.deepcopy(VALID)
    hosts(inv, "brokers")["nohost-b3"]["broker_rack"] = "r1"
    out = "".join(run_site(tmp_path, inv).stdout)
    assert "WARNING: brokers per rack differ" in out, out
    assert "PLAY [OS tuning]" in out, out
