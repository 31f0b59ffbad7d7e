"""SASL to ZooKeeper from the playbooks (zookeeper_sasl_*): the preflight's refusals of
an incomplete setting, each naming the variable, before any host is contacted (the hosts
do not exist, see test_inventory_validation.py); playbooks/zookeeper-sasl.yml's refusal of
an inventory without it; and the zookeeper and broker roles' files (zoo.cfg, the JAAS
Server section, server.properties) rendered with the deploy venv's Jinja as Ansible
renders them (trim_blocks)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_enable_authorizer import render_server_properties
from test_inventory_validation import ANSIBLE_PLAYBOOK, REPO, VALID, hosts, run_site

DIGEST = {"zookeeper_sasl_enabled": True, "zookeeper_sasl_mechanism": "DIGEST-MD5",
          "zookeeper_sasl_users": [{"name": "kafka", "password": "zk-secret"}]}
GSSAPI = {"zookeeper_sasl_enabled": True, "zookeeper_sasl_mechanism": "GSSAPI"}


def inventory(**settings: Any) -> dict[str, Any]:
    inv = copy.deepcopy(VALID)
    inv["all"]["vars"].update(settings)
    return inv


def per_host(settings: dict[str, Any], own: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """VALID with `settings` for all and each host's own on top: the preflight checks
    every host in one task, so one run shows several hosts' refusals at once."""
    inv = inventory(**settings)
    for group in ("zookeeper", "brokers"):
        for host, values in hosts(inv, group).items():
            values.update(own.get(host, {}))
    return inv


# each case: an inventory, and the messages its run must print
CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "digest users": (
        per_host({**DIGEST, "zookeeper_sasl_users": []},
                 {"nohost-b1": {"zookeeper_sasl_users": [{"name": "admin", "password": "a"}]}}),
        ["nohost-zk1, SASL to ZooKeeper: zookeeper_sasl_users must list the DIGEST-MD5 "
         "users, each with a name and a password",
         "nohost-b1, SASL to ZooKeeper: the brokers log in as "
         "broker_zookeeper_sasl_username kafka: add it to zookeeper_sasl_users"]),
    "gssapi realm and keytabs": (
        per_host({**GSSAPI, "kerberos_realm": "EXAMPLE.TEST"},
                 {"nohost-zk1": {"kerberos_realm": ""}}),
        ["nohost-zk1, SASL to ZooKeeper: GSSAPI needs kerberos_realm",
         "nohost-zk2, SASL to ZooKeeper: GSSAPI needs kerberos_kdc_host (an inventory "
         "host running the lab KDC) or kerberos_zookeeper_keytab_src",
         "nohost-b1, SASL to ZooKeeper: GSSAPI needs kerberos_kdc_host (an inventory "
         "host running the lab KDC) or kerberos_broker_keytab_src"]),
    "required without sasl": (
        inventory(zookeeper_sasl_required=True),
        ["zookeeper_sasl_required needs zookeeper_sasl_enabled"]),
    "not the same everywhere": (
        per_host(DIGEST, {"nohost-b2": {"zookeeper_sasl_enabled": False}}),
        ["nohost-b2, SASL to ZooKeeper: zookeeper_sasl_enabled and "
         "zookeeper_sasl_mechanism must be the same on every ZooKeeper and broker host"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_incomplete_zookeeper_sasl_settings_stop_in_preflight(tmp_path: Path,
                                                               case: str) -> None:
    inv, messages = CASES[case]
    result = run_site(tmp_path, inv)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    flat = " ".join(out.split())
    for message in messages:
        assert message in flat, out
    assert "zk-secret" not in out  # a password is never printed
    assert "PLAY [OS tuning]" not in out, "the play went past the inventory check:\n" + out


@pytest.mark.parametrize("settings", [DIGEST, {**GSSAPI, "kerberos_realm": "EXAMPLE.TEST",
                                               "kerberos_kdc_host": "nohost-zk1"}],
                         ids=["digest", "gssapi"])
def test_complete_settings_pass(tmp_path: Path, settings: dict[str, Any]) -> None:
    out = run_site(tmp_path, inventory(**settings, zookeeper_sasl_required=True)).stdout
    assert "PLAY [OS tuning]" in out, out


def test_the_move_refuses_an_inventory_without_sasl(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yml"
    path.write_text(json.dumps(inventory()), encoding="utf-8")
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_STRATEGY="linear")
    done = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", str(path),
                           str(REPO / "playbooks" / "zookeeper-sasl.yml")],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode != 0
    assert "set zookeeper_sasl_enabled: true" in " ".join(done.stdout.split()), done.stdout
    assert "UNREACHABLE" not in done.stdout  # stopped before any host


RENDER = """
import json, sys
import jinja2
env = jinja2.Environment(loader=jinja2.FileSystemLoader(sys.argv[1]), trim_blocks=True,
                         undefined=jinja2.StrictUndefined)
env.filters["bool"] = lambda value: str(value).lower() in ("true", "yes", "1")  # Ansible's
variables = json.load(sys.stdin)
print(env.get_template(variables.pop("template")).render(variables), end="")
"""

ZOO_CFG = {
    "ansible_managed": "managed", "zookeeper_tick_time": 2000, "zookeeper_init_limit": 10,
    "zookeeper_sync_limit": 5, "zookeeper_data_dir": "/d", "zookeeper_data_log_dir": "/l",
    "zookeeper_client_port": 2181, "zookeeper_tls_enabled": False,
    "zookeeper_max_client_connections": 60, "zookeeper_snap_count": 100000,
    "zookeeper_prealloc_size_kb": 65536, "zookeeper_autopurge_snap_retain_count": 3,
    "zookeeper_autopurge_purge_interval_hours": 24, "zookeeper_4lw_whitelist": ["srvr"],
    "zookeeper_admin_server_port": 8080, "groups": {"zookeeper": []}, "hostvars": {},
    "zookeeper_quorum_port": 2888, "zookeeper_election_port": 3888,
    "zookeeper_servers": [{"id": 2, "address": "10.0.0.2"}, {"id": 1, "address": "10.0.0.1"}],
    "zookeeper_custom_properties": {}, "zookeeper_quorum_tls_enabled": False,
    "zookeeper_quorum_tls_stage": "", "zookeeper_sasl_enabled": True,
    "zookeeper_sasl_mechanism": "DIGEST-MD5", "zookeeper_sasl_required": False,
    "zookeeper_sasl_jaas_file": "/etc/zookeeper/conf_moldau/jaas.conf",
    "zookeeper_sasl_users": [{"name": "kafka", "password": 'p"w\\d'},
                             {"name": "admin", "password": "a"}],
    "zookeeper_kerberos_keytab": "/etc/zookeeper/zookeeper.keytab",
    "zookeeper_kerberos_principal": "zookeeper/zk1.example.test@EXAMPLE.TEST",
}


def render_zookeeper(template: str, **overrides: Any) -> str:
    python = ANSIBLE_PLAYBOOK.parent / "python"
    done = subprocess.run([str(python), "-c", RENDER, str(REPO / "roles/zookeeper/templates")],
                          input=json.dumps({**ZOO_CFG, **overrides, "template": template}),
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def test_zoo_cfg_offers_sasl_and_requires_it_only_when_asked() -> None:
    offered = render_zookeeper("zoo.cfg.j2").splitlines()
    assert ("authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
            in offered)
    assert not [line for line in offered if line.startswith(("enforce.auth", "kerberos."))]
    required = render_zookeeper("zoo.cfg.j2", zookeeper_sasl_required=True,
                                zookeeper_sasl_mechanism="GSSAPI").splitlines()
    for line in ("enforce.auth.enabled=true", "enforce.auth.schemes=sasl",
                 "kerberos.removeHostFromPrincipal=true",
                 "kerberos.removeRealmFromPrincipal=true"):
        assert line in required
    off = render_zookeeper("zoo.cfg.j2", zookeeper_sasl_enabled=False)
    assert "authProvider.sasl" not in off
    # the server lines come from zookeeper_servers (the membership playbook's steps), by id
    assert [line for line in off.splitlines() if line.startswith("server.")] == [
        "server.1=10.0.0.1:2888:3888", "server.2=10.0.0.2:2888:3888"]


def test_jaas_server_section_parses_as_zookeeper_reads_it() -> None:
    from moldau.security.sasl.jaas import parse_jaas_file

    digest = parse_jaas_file(render_zookeeper("jaas.conf.j2"), {})
    [entry] = digest["Server"]
    assert entry.login_module == "org.apache.zookeeper.server.auth.DigestLoginModule"
    assert entry.options == {"user_kafka": 'p"w\\d', "user_admin": "a"}
    kerberos = parse_jaas_file(render_zookeeper("jaas.conf.j2",
                                                zookeeper_sasl_mechanism="GSSAPI"), {})
    [entry] = kerberos["Server"]
    assert entry.login_module == "com.sun.security.auth.module.Krb5LoginModule"
    assert entry.options["principal"] == "zookeeper/zk1.example.test@EXAMPLE.TEST"
    assert entry.options["keyTab"] == "/etc/zookeeper/zookeeper.keytab"


def test_server_properties_sets_secure_acls_with_a_sasl_identity() -> None:
    with_sasl = render_server_properties(
        broker_zookeeper_sasl_enabled=True, broker_zookeeper_sasl_mechanism="DIGEST-MD5",
        broker_zookeeper_jaas_file="/etc/moldau/zookeeper-client-jaas.conf",
        broker_env_file="/etc/moldau/moldau-broker.env").splitlines()
    assert "zookeeper.set.acl=true" in with_sasl
    held = render_server_properties(
        broker_zookeeper_sasl_enabled=True, broker_zookeeper_sasl_mechanism="GSSAPI",
        broker_zookeeper_jaas_file="/etc/moldau/zookeeper-client-jaas.conf",
        broker_env_file="/etc/moldau/moldau-broker.env", broker_zookeeper_set_acl=False)
    assert "zookeeper.set.acl" not in held  # the move's step 2 keeps a broker's value
    assert "zookeeper.set.acl" not in render_server_properties()


def run_guard(tmp_path: Path, tasks_from: str, zoo_cfg: str | None,
              variables: dict[str, Any]) -> tuple[int, str]:
    """One of the zookeeper role's guards (tasks_from), run on the control node against a
    conf dir as a member would have it (zoo_cfg None: a new member without one); its
    exit code and output."""
    conf = tmp_path / "conf"
    conf.mkdir()
    if zoo_cfg is not None:
        (conf / "zoo.cfg").write_text(zoo_cfg, encoding="utf-8")
    playbook = tmp_path / "guard.yml"
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": False,
        "tasks": [{"ansible.builtin.include_role": {"name": "zookeeper",
                                                     "tasks_from": tasks_from},
                   "vars": {"zookeeper_conf_dir": str(conf), **variables}}]}]),
        encoding="utf-8")
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STRATEGY="linear", ANSIBLE_LOCALHOST_WARNING="0")
    result = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={ANSIBLE_PLAYBOOK.parent / 'python'}", str(playbook)],
        capture_output=True, text=True, env=env, timeout=120, check=False)
    return result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize("zoo_cfg, refused", [
    ("clientPort=2181\n", True),                              # running, SASL not required
    ("clientPort=2181\nenforce.auth.enabled=true\n", False),  # requires it already
    (None, False),                                            # a new member
])
def test_a_running_member_is_not_made_to_require_sasl_outside_the_move(
        tmp_path: Path, zoo_cfg: str | None, refused: bool) -> None:
    """The zookeeper role's guard (tasks/sasl_guard.yml), run on the control node against
    a conf dir as a member would have it: site.yml would otherwise require SASL before
    the brokers log in with it (playbooks/zookeeper-sasl.yml is the way there)."""
    rc, out = run_guard(tmp_path, "sasl_guard.yml", zoo_cfg, {})
    assert (rc != 0) == refused, out
    if refused:
        assert "Run playbooks/zookeeper-sasl.yml" in " ".join(out.split()), out
