"""What roles/exporters gives the lag exporter to read the cluster with, per inventory: the
listener it picks, the client settings file it renders (TLS files, the SASL login), and
the refusals, each naming the variable to set (a SASL listener without the exporter's
password, a listener with only GSSAPI, an unknown listener or mechanism); and the user and
ACLs the broker and access roles issue for it. Ansible on the control node alone (the
role's own check and template, the roles' defaults): no host is contacted."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = REPO / ".venv-deploy" / "bin" / "ansible-playbook"
PASSWORD = "Lag0exporter0password"
PLAINTEXT = {"port": 9092, "protocol": "PLAINTEXT"}
SSL = {"port": 9093, "protocol": "SSL"}
SASL_SSL = {"port": 9094, "protocol": "SASL_SSL", "mechanisms": ["SCRAM-SHA-512"]}
LAB = {"PLAINTEXT": PLAINTEXT, "SSL": SSL, "SASL_SSL": SASL_SSL}

# case: (variables, the listener chosen or the refusal's words)
CASES: dict[str, tuple[dict[str, Any], str]] = {
    "ssl first": ({"broker_listeners": LAB, "exporters_lag_sasl_password": PASSWORD}, "SSL"),
    "the named sasl listener": ({"broker_listeners": LAB, "exporters_lag_sasl_password": PASSWORD,
                                 "exporters_lag_listener_name": "SASL_SSL"}, "SASL_SSL"),
    "sasl before plaintext with a password": (
        {"broker_listeners": {"PLAINTEXT": PLAINTEXT, "CLIENTS": {
            "port": 9095, "protocol": "SASL_PLAINTEXT", "mechanisms": ["GSSAPI", "PLAIN"]}},
         "exporters_lag_sasl_password": PASSWORD}, "CLIENTS"),
    "plaintext without a password": (
        {"broker_listeners": {"PLAINTEXT": PLAINTEXT, "SASL_SSL": SASL_SSL}}, "PLAINTEXT"),
    "sasl only, no password": (
        {"broker_listeners": {"SASL_SSL": SASL_SSL}},
        "listener SASL_SSL is SASL_SSL: set exporters_lag_sasl_password"),
    "kerberos only": (
        {"broker_listeners": {"KRB": {"port": 9094, "protocol": "SASL_PLAINTEXT",
                                      "mechanisms": ["GSSAPI"]}},
         "exporters_lag_sasl_password": PASSWORD},
        "listener KRB (SASL_PLAINTEXT) offers it no mechanism it logs in with"),
    "unknown listener": ({"broker_listeners": LAB, "exporters_lag_listener_name": "SASL"},
                         "exporters_lag_listener_name SASL names no listener of broker_listeners "
                         "(PLAINTEXT, SSL, SASL_SSL)"),
    "mechanism the listener lacks": (
        {"broker_listeners": LAB, "exporters_lag_sasl_password": PASSWORD,
         "exporters_lag_listener_name": "SASL_SSL",
         "exporters_lag_sasl_mechanism": "SCRAM-SHA-256"},
        "exporters_lag_sasl_mechanism SCRAM-SHA-256 is not among listener SASL_SSL's mechanisms"),
}


def play(name: str, variables: dict[str, Any]) -> dict[str, Any]:
    """The role's check, then what it would render: debug messages only, so nothing runs
    a module (a local module run costs seconds on a loaded machine)."""
    return {
        "name": name, "hosts": "localhost", "gather_facts": False,
        "vars": {**variables, "ansible_connection": "local"},
        "tasks": [{"block": [
            {"ansible.builtin.include_role": {"name": "exporters",
                                              "tasks_from": "lag_login_check.yml",
                                              "public": True}},
            {"ansible.builtin.debug": {"msg": {
                "listener": "{{ exporters_lag_listener.key }}",
                "properties": "{{ lookup('ansible.builtin.template', '"
                              + str(REPO / "roles/exporters/templates/lag-client.properties.j2")
                              + "') }}"}}},
        ], "rescue": [{"ansible.builtin.debug": {"msg": {
            "error": "{{ ansible_failed_result.msg }}"}}}]}],
    }


def run(plays: list[dict[str, Any]], tmp_path: Path) -> dict[str, dict[str, Any]]:
    """Each play's last debug message, by the play's name."""
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.fail(f"{ANSIBLE_PLAYBOOK} missing: run `make deploy-deps` first")
    playbook = tmp_path / "playbook.yml"
    playbook.write_text(json.dumps(plays), encoding="utf-8")  # YAML reads JSON
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(REPO / "roles"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STRATEGY="linear", ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_STDOUT_CALLBACK="json")
    # run outside the repository: its ansible.cfg adds a callback that would print
    # beside the JSON report
    done = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(playbook)],
                          capture_output=True, text=True, env=env, timeout=300, check=False,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    messages = {}
    for played in report["plays"]:
        shown = [task["hosts"]["localhost"]["msg"] for task in played["tasks"]
                 if "msg" in task["hosts"].get("localhost", {})]
        messages[played["play"]["name"]] = shown[-1]
    return messages


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return run([play(name, variables) for name, (variables, _) in CASES.items()],
               tmp_path_factory.mktemp("lag-login"))


@pytest.mark.parametrize("case", CASES)
def test_the_listener_or_the_refusal(results: dict[str, dict[str, Any]], case: str) -> None:
    _, expected = CASES[case]
    if "error" in results[case]:
        assert expected in " ".join(results[case]["error"].split()), results[case]
        assert PASSWORD not in results[case]["error"]
    else:
        assert results[case]["listener"] == expected


def properties(results: dict[str, dict[str, Any]], case: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in results[case]["properties"].splitlines()
                if line and not line.startswith("#"))


def test_the_client_settings_per_listener(results: dict[str, dict[str, Any]]) -> None:
    tls = "/etc/moldau-exporters/tls"
    assert properties(results, "ssl first") == {
        "security.protocol": "SSL", "ssl.ca.location": f"{tls}/ca.pem",
        "ssl.certificate.location": f"{tls}/moldau-lag-exporter.crt",
        "ssl.key.location": f"{tls}/moldau-lag-exporter.key"}
    assert properties(results, "the named sasl listener") == {
        "security.protocol": "SASL_SSL", "ssl.ca.location": f"{tls}/ca.pem",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "moldau-lag-exporter",
        "sasl.password": PASSWORD}
    # the listener's first mechanism the exporter logs in with (not GSSAPI)
    assert properties(results, "sasl before plaintext with a password") == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "moldau-lag-exporter", "sasl.password": PASSWORD}


def test_the_user_and_acls_issued_for_it(tmp_path: Path) -> None:
    """The broker role's users (SCRAM credentials, PLAIN JAAS lines) and what roles/access
    writes, from the two roles' defaults: the exporter's user once it has a password."""
    def issued(name: str, **variables: Any) -> dict[str, Any]:
        # after the defaults: a later vars file wins over them (play vars would not)
        settings = tmp_path / f"{name}.json"
        settings.write_text(json.dumps({
            **variables, "broker_sasl_admin_password": "admin-secret",
            "broker_listeners": {"SASL": {"port": 9094, "protocol": "SASL_SSL",
                                          "mechanisms": ["PLAIN", "SCRAM-SHA-512"]}}}))
        return {"name": name, "hosts": "localhost", "gather_facts": False,
                "vars_files": [str(REPO / "roles/broker/defaults/main.yml"),
                               str(REPO / "roles/access/defaults/main.yml"), str(settings)],
                "vars": {"ansible_connection": "local"},
                "tasks": [{"ansible.builtin.debug": {"msg": {
                    "scram": "{{ access_desired_state.users | map(attribute='name') | list }}",
                    "plain": "{{ broker_sasl_plain_users | map(attribute='name') | list }}",
                    "acls": "{{ access_desired_state.acls }}"}}}]}

    issued_users = run([issued("with", exporters_lag_sasl_password=PASSWORD), issued("without")],
                       tmp_path)
    with_user = issued_users["with"]
    assert with_user["scram"] == ["admin", "moldau-lag-exporter"], with_user
    assert with_user["plain"] == ["admin", "moldau-lag-exporter"], with_user
    assert sorted(with_user["acls"], key=lambda a: a["resource_type"]) == [
        {"principal": "User:moldau-lag-exporter", "operation": "Describe", "permission": "Allow",
         "resource_type": resource, "resource_name": "*", "pattern_type": "literal"}
        for resource in ("Group", "Topic")]
    assert issued_users["without"] == {"scram": ["admin"], "plain": ["admin"], "acls": []}
