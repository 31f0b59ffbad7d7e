"""Quorum TLS (zookeeper_quorum_tls_enabled): zoo.cfg at each stage of
playbooks/zookeeper-quorum-tls.yml's three rolls, rendered as Ansible renders it; the
zookeeper role's guard that refuses to switch a running member's quorum protocol outside
that playbook (run on the control node against a conf dir as a member has it); and the
preflight's refusal of quorum TLS without the members' certificates or differing between
members, before any host is contacted."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_inventory_validation import run_site
from test_zookeeper_sasl_inventory import inventory, per_host, render_zookeeper, run_guard

QUORUM_KEYS = ("ssl.quorum.keyStore.location=/etc/moldau/tls/zk1.pem",
               "ssl.quorum.keyStore.type=PEM",
               "ssl.quorum.trustStore.location=/etc/moldau/tls/ca.pem",
               "ssl.quorum.trustStore.type=PEM",
               "ssl.quorum.hostnameVerification=true")


def zoo_cfg(enabled: bool, stage: str = "") -> list[str]:
    return render_zookeeper("zoo.cfg.j2", zookeeper_sasl_enabled=False,
                            zookeeper_tls_enabled=True,
                            zookeeper_secure_client_port=2182,
                            zookeeper_tls_keystore_file="/etc/moldau/tls/zk1.pem",
                            zookeeper_tls_ca_file="/etc/moldau/tls/ca.pem",
                            zookeeper_quorum_tls_enabled=enabled,
                            zookeeper_quorum_tls_stage=stage).splitlines()


def quorum_lines(lines: list[str]) -> list[str]:
    return [line for line in lines
            if line.startswith(("ssl.quorum.", "sslQuorum", "portUnification"))]


@pytest.mark.parametrize("enabled, stage, ssl_quorum, unified", [
    (False, "", None, False),      # plain: no quorum TLS keys at all
    (True, "unify", "false", True),   # roll 1 towards TLS (roll 2 back to plain)
    (True, "tls", "true", True),      # roll 2 towards TLS (roll 1 back to plain)
    (False, "unify", "false", True),  # the stages do not depend on the target
    (True, "", "true", False),        # TLS only
])
def test_zoo_cfg_at_each_stage(enabled: bool, stage: str, ssl_quorum: str | None,
                               unified: bool) -> None:
    lines = quorum_lines(zoo_cfg(enabled, stage))
    if ssl_quorum is None:
        assert lines == []
        return
    assert [line for line in lines if line.startswith("ssl.quorum.")] == list(QUORUM_KEYS)
    assert f"sslQuorum={ssl_quorum}" in lines
    assert ("portUnification=true" in lines) == unified


@pytest.mark.parametrize("zoo_cfg_text, enabled, refused", [
    ("clientPort=2181\n", True, True),                # plain quorum asked for TLS
    ("clientPort=2181\nsslQuorum=true\n", False, True),  # TLS quorum asked for plain
    ("clientPort=2181\nsslQuorum=true\n", True, False),  # as it runs
    ("clientPort=2181\n", False, False),
    (None, True, False),                              # a new member starts as asked
], ids=["to-tls", "to-plain", "tls", "plain", "new-member"])
def test_a_running_member_does_not_switch_quorum_protocol_outside_the_playbook(
        tmp_path: Path, zoo_cfg_text: str | None, enabled: bool, refused: bool) -> None:
    rc, out = run_guard(tmp_path, "quorum_tls_guard.yml", zoo_cfg_text,
                        {"zookeeper_quorum_tls_enabled": enabled})
    assert (rc != 0) == refused, out
    if refused:
        assert "Run playbooks/zookeeper-quorum-tls.yml" in " ".join(out.split()), out


def test_quorum_tls_without_certificates_or_unequal_stops_in_preflight(tmp_path: Path) -> None:
    inv = per_host({"zookeeper_quorum_tls_enabled": True},
                   {"nohost-zk2": {"zookeeper_quorum_tls_enabled": False}})
    result = run_site(tmp_path, inv)
    out = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0, out
    assert ("nohost-zk1: zookeeper_quorum_tls_enabled needs zookeeper_tls_enabled (the "
            "member's certificate) and must be the same on every member") in out
    assert "nohost-zk2: zookeeper_quorum_tls_enabled needs" in out
    assert "PLAY [OS tuning]" not in out


def test_quorum_tls_with_client_tls_passes_preflight(tmp_path: Path) -> None:
    out = run_site(tmp_path, inventory(zookeeper_quorum_tls_enabled=True,
                                       zookeeper_tls_enabled=True)).stdout
    assert "PLAY [OS tuning]" in out, out
