"""The tools by name (`moldau <name>`), imported only when run."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

# name -> the module holding its TOOL (or "module:ATTRIBUTE")
TOOLS = {
    "topics": "moldau.tools.topics",
    "configs": "moldau.tools.configs",
    "acls": "moldau.tools.acls",
    "consumer-groups": "moldau.tools.consumer_groups",
    "console-producer": "moldau.tools.console_producer",
    "console-consumer": "moldau.tools.console_consumer",
    "cluster": "moldau.tools.cluster",
    "broker-api-versions": "moldau.tools.api_versions",
    "get-offsets": "moldau.tools.get_offsets",
    "delete-records": "moldau.tools.delete_records",
    "log-dirs": "moldau.tools.log_dirs",
    "leader-election": "moldau.tools.leader_election",
    "preferred-replica-election": "moldau.tools.leader_election:PREFERRED_TOOL",
    "reassign-partitions": "moldau.tools.reassign_partitions",
    "zookeeper-shell": "moldau.tools.zookeeper_shell",
    "zookeeper-security-migration": "moldau.tools.zk_security_migration",
    "dump-log": "moldau.tools.dump_log",
    "run-class": "moldau.tools.run_class",
    "producer-perf-test": "moldau.tools.perf:PRODUCER_TOOL",
    "consumer-perf-test": "moldau.tools.perf:CONSUMER_TOOL",
    "mirror-maker": "moldau.tools.mirror_maker",
    "delegation-tokens": "moldau.tools.delegation_tokens",
    "transactions": "moldau.tools.transactions",
}


def run_tool(name: str, argv: Sequence[str]) -> int:
    module, _, attribute = TOOLS[name].partition(":")
    tool = getattr(importlib.import_module(module), attribute or "TOOL")
    return tool.main(list(argv))
