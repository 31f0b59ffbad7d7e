"""The ZooKeeper exporter against the session's real three-node ensemble: one Leader and
two Followers, each with its server id, under the names Strimzi's ZooKeeper dashboard
and alerts query; every name served is in the reference list (tests/data)."""

from __future__ import annotations

from pathlib import Path

from moldau_exporters.zookeeper_exporter import (
    UP,
    four_letter_word,
    parse_conf,
    parse_mntr,
    samples_from,
    scrape,
)

REFERENCE = Path(__file__).parent / "data" / "zookeeper-jmx.txt"


def reference() -> tuple[set[str], set[str]]:
    """(the JMX exporter's names, ZooKeeper's native names)."""
    jmx, native = set(), set()
    section = 1
    for line in REFERENCE.read_text().splitlines():
        if line.startswith("# ---- Section 2"):
            section = 2
        if line and not line.startswith("#"):
            (jmx if section == 1 else native).add(line.split("\t")[0])
    return jmx, native


def test_every_node_reports_under_known_names(zk_ensemble) -> None:
    jmx, native = reference()
    members = []
    for port in zk_ensemble.client_ports:
        mntr = parse_mntr(four_letter_word("127.0.0.1", port, "mntr"))
        server_id = parse_conf(four_letter_word("127.0.0.1", port, "conf"))["serverId"]
        samples = samples_from(mntr, server_id, native=True)
        by_name = {s.name: s for s in samples}
        latency = by_name["zookeeper_avgrequestlatency"]
        labels = dict(latency.labels)
        assert labels["replicaId"] == server_id
        members.append(labels["memberType"])
        assert by_name["zookeeper_inmemorydatatree_nodecount"].value > 0
        assert by_name["zookeeper_quorumsize"].value == 3
        names = {s.name for s in samples}
        assert "zookeeper_outstandingrequests" in names
        jmx_style = {n for n in names if n.startswith("zookeeper_")}
        assert jmx_style <= jmx, sorted(jmx_style - jmx)
        # the native names are mntr's keys without zk_: the listed ones mntr has are there
        listed = {n for n in native if f"zk_{n}" in mntr}
        assert listed and listed <= names
    assert sorted(members) == ["Follower", "Follower", "Leader"]


def test_an_unreachable_node_is_reported_not_raised() -> None:
    from moldau.devcluster.brokers import free_port

    text = scrape("127.0.0.1", free_port())()
    assert f"{UP} 0.0" in text.splitlines()
