"""zookeeper-shell against the cluster's real ZooKeeper chroot: the seeds' `ls` and `get`,
then create, stat and delete, from arguments and from standard input."""

from __future__ import annotations

import json
import re

from .toolrun import ToolCluster, run

SHELL = "zookeeper-shell.sh"


def _banner(connect: str, piped: bool = False) -> str:
    """3.9's banner; commands read from stdin (ZooKeeperMain's interactive mode) add
    the welcome and the jline lines (issue 41 item 7)."""
    welcome = "Welcome to ZooKeeper!\nJLine support is disabled\n" if piped else ""
    return (f"Connecting to {connect}\n{welcome}\nWATCHER::\n\n"
            "WatchedEvent state:SyncConnected type:None path:null\n")


def test_seed_ls_and_get(cluster: ToolCluster) -> None:
    cluster.ok("kafka-topics.sh", "--create", "--topic", "helloworld-zk", "--partitions", "1")
    ids = run(SHELL, cluster.zk_connect, "ls", "/brokers/ids")
    assert (ids.code, ids.out) == (0, _banner(cluster.zk_connect) + "[1, 2, 3]\n")
    topics = run(SHELL, cluster.zk_connect, "ls", "/brokers/topics")
    assert "helloworld-zk" in topics.out.splitlines()[-1].strip("[]").split(", ")
    controller = run(SHELL, cluster.zk_connect, "get", "/controller")
    data = json.loads(controller.out.splitlines()[-1])
    assert data["version"] == 2 and data["brokerid"] in (1, 2, 3)


def test_create_stat_delete(cluster: ToolCluster) -> None:
    script = "create /tools-shell hello\nget /tools-shell\nstat /tools-shell\n" \
             "delete /tools-shell\nquit\n"
    session = run(SHELL, cluster.zk_connect, stdin=script)
    assert session.code == 0, session.err
    assert session.out.startswith(_banner(cluster.zk_connect, piped=True))
    body = session.out[len(_banner(cluster.zk_connect, piped=True)):].splitlines()
    assert body[:2] == ["Created /tools-shell", "hello"]
    assert re.fullmatch(r"cZxid = 0x[0-9a-f]+", body[2])
    assert "dataLength = 5" in body and "numChildren = 0" in body
    gone = run(SHELL, cluster.zk_connect, "get", "/tools-shell")
    assert (gone.code, gone.err) == (1, "Node does not exist: /tools-shell\n")
    assert run(SHELL).code == 1
