"""ZooKeeper's metrics for Prometheus from its `mntr` command, under the names Strimzi's
JMX exporter rules give ZooKeeper's MBeans (the names its ZooKeeper dashboard and alert
rules query, e.g. `zookeeper_avgrequestlatency`, `zookeeper_outstandingrequests`), with
the labels `memberType` (Leader, Follower, ...) and `replicaId` (the server id, from
`conf`). Debian's ZooKeeper has no Prometheus provider; `--native-names` adds the names
that provider would use (`avg_latency`, `znode_count`, ...) as well.

    moldau-zookeeper-exporter --zookeeper 127.0.0.1:2181 --listen 127.0.0.1:9141

The node must allow the commands (`4lw.commands.whitelist` with at least mntr,conf).
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Callable

from .exposition import exposition, run
from .jmx_rules import Sample

UP = "moldau_zookeeper_exporter_up"  # ours: whether the node answered
# mntr key -> the JMX exporter's name (Strimzi's rules), where ZooKeeper has an MBean
JMX_NAMES = {
    "zk_auth_failed_count": "zookeeper_authfailedcount",
    "zk_avg_latency": "zookeeper_avgrequestlatency",
    "zk_max_latency": "zookeeper_maxrequestlatency",
    "zk_min_latency": "zookeeper_minrequestlatency",
    "zk_last_client_response_size": "zookeeper_lastclientresponsesize",
    "zk_max_client_response_size": "zookeeper_maxclientresponsesize",
    "zk_min_client_response_size": "zookeeper_minclientresponsesize",
    "zk_last_proposal_size": "zookeeper_lastproposalsize",
    "zk_max_proposal_size": "zookeeper_maxproposalsize",
    "zk_min_proposal_size": "zookeeper_minproposalsize",
    "zk_non_mtls_local_conn_count": "zookeeper_nonmtlslocalconncount",
    "zk_non_mtls_remote_conn_count": "zookeeper_nonmtlsremoteconncount",
    "zk_num_alive_connections": "zookeeper_numaliveconnections",
    "zk_outstanding_requests": "zookeeper_outstandingrequests",
    "zk_packets_received": "zookeeper_packetsreceived",
    "zk_packets_sent": "zookeeper_packetssent",
    "zk_watch_count": "zookeeper_inmemorydatatree_watchcount",
    "zk_znode_count": "zookeeper_inmemorydatatree_nodecount",
}
COUNTERS = {"zk_packets_received", "zk_packets_sent", "zk_auth_failed_count"}
UNLABELLED = {"zk_quorum_size": "zookeeper_quorumsize"}  # the QuorumMXBean has no member
MEMBER_TYPES = {"leader": "Leader", "follower": "Follower", "observer": "Observer",
                "standalone": "StandaloneServer"}


def four_letter_word(host: str, port: int, command: str, timeout: float = 5.0) -> str:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command.encode("ascii"))
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _pairs(text: str, separator: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(separator)
        if sep:
            out[key.strip()] = value.strip()
    return out


def parse_mntr(text: str) -> dict[str, str]:
    """`mntr`: one `key<TAB>value` a line."""
    return _pairs(text, "\t")


def parse_conf(text: str) -> dict[str, str]:
    """`conf`: one `key=value` a line."""
    return _pairs(text, "=")


def samples_from(mntr: dict[str, str], server_id: str, native: bool) -> list[Sample]:
    member = MEMBER_TYPES.get(mntr.get("zk_server_state", ""), "Unknown")
    labels = (("memberType", member), ("replicaId", server_id))
    samples = []
    for key, text in mntr.items():
        try:
            value = float(text)
        except ValueError:
            continue  # zk_version, zk_server_state, zk_peer_state
        kind = "COUNTER" if key in COUNTERS else "GAUGE"
        if key in JMX_NAMES:
            samples.append(Sample(JMX_NAMES[key], labels, value, kind, f"mntr {key}"))
        elif key in UNLABELLED:
            samples.append(Sample(UNLABELLED[key], (), value, kind, f"mntr {key}"))
        if native and key.startswith("zk_"):
            samples.append(Sample(key[3:], (), value, kind, f"mntr {key}"))
    return samples


def scrape_samples(host: str, port: int, native: bool = False) -> list[Sample]:
    """The node's samples, or none when it does not answer, and the UP gauge saying so."""
    try:
        mntr = parse_mntr(four_letter_word(host, port, "mntr"))
        if not mntr:
            raise OSError("mntr gave nothing (is it in 4lw.commands.whitelist?)")
        conf = parse_conf(four_letter_word(host, port, "conf"))
        samples = samples_from(mntr, conf.get("serverId", "0"), native)
        up = 1.0
    except OSError:
        samples, up = [], 0.0
    samples.append(Sample(UP, (), up, "GAUGE", "1 when the node answered mntr, else 0"))
    return samples


def scrape(host: str, port: int, native: bool = False) -> Callable[[], str]:
    """A scrape in the Prometheus text format (what /metrics answers), each time called."""
    return lambda: exposition(scrape_samples(host, port, native))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="moldau-zookeeper-exporter", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zookeeper", default="127.0.0.1:2181", help="host:port of the node")
    parser.add_argument("--listen", default="127.0.0.1:9141", help="host:port to serve on")
    parser.add_argument("--native-names", action="store_true",
                        help="also ZooKeeper's own Prometheus provider names")
    args = parser.parse_args(argv)
    zk_host, _, zk_port = args.zookeeper.rpartition(":")
    host, port = zk_host or "127.0.0.1", int(zk_port)
    return run(lambda: scrape_samples(host, port, args.native_names), args.listen)


if __name__ == "__main__":
    sys.exit(main())
