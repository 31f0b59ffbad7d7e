"""The multi-instance scenario's view of placement, run on a broker host with the broker's
venv beside moldau_ops.py (it reads ZooKeeper as the operations playbooks do).

  placement_check.py PROPS hosts            the registered brokers and their
                                            moldau.broker.host (JSON)
  placement_check.py PROPS spread TOPIC...  each partition's replicas and their hosts;
                                            exit 1 when a partition of these topics has
                                            two replicas on one host
  placement_check.py PROPS plan FILE        the same for a reassignment plan's proposal"""

from __future__ import annotations

import json
import sys

sys.path.insert(0, "/opt/moldau")

from moldau_health import connect
from moldau_ops import read_cluster


def crowded(assignment: dict[str, list[int]], hosts: dict[int, str]) -> list[str]:
    """The partitions with two replicas on one host (a broker without a host is its own)."""
    return [name for name, replicas in sorted(assignment.items())
            if len({hosts.get(b, f"broker-{b}") for b in replicas}) < len(replicas)]


def main(argv: list[str]) -> int:
    zk, _props, why = connect(argv[0])
    if zk is None:
        print(why)
        return 2
    try:
        cluster = read_cluster(zk, 1)
    finally:
        zk.stop()
        zk.close()
    if argv[1] == "hosts":
        print(json.dumps({str(b): cluster.hosts.get(b, "") for b in sorted(cluster.brokers)}))
        return 0
    if argv[1] == "spread":
        topics = set(argv[2:])
        assignment = {f"{t}-{p}": r for (t, p), r in cluster.replicas.items() if t in topics}
    else:
        with open(argv[2]) as f:
            plan = json.load(f)
        assignment = {f"{p['topic']}-{p['partition']}": p["replicas"] for p in plan["partitions"]}
    bad = crowded(assignment, cluster.hosts)
    print(json.dumps({"partitions": len(assignment), "two_on_one_host": bad,
                      "assignment": assignment}))
    return 1 if bad or not assignment else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
