"""Test-wide settings.

Hypothesis explores new random examples on every local run, which is how it finds bugs;
CI (`CI` set by .ci/run) runs a derandomized profile instead, so a landing is never
decided by the luck of one draw. A failure found locally prints a reproducible blob.
`make test-long` picks the `long` profile (HYPOTHESIS_PROFILE): ten times the examples,
drawn afresh, for the property tests of the codec, storage and coordinator; a test that
names its own max_examples scales it with hypothesis_budget.examples, since an explicit
number overrides the profile's.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.register_profile("long", max_examples=1000, print_blob=True, deadline=None)
_default_profile = "ci" if os.environ.get("CI") else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or _default_profile)
from zk_fixtures import zk_chroot, zk_client, zk_ensemble  # noqa: F401, E402  (ZooKeeper fixtures)

# The files that take longest (seconds of test time in one worker, measured 2026-12-07 in
# a full run on a machine other work loaded, so about 1.3x a quiet run), longest first.
# `make test` runs the suite in pytest-xdist workers a file at a time, in collection order
# (--no-loadscope-reorder): a long file handed out last keeps one worker busy after the
# others have finished, so these go first and the short files fill in around them. A
# file missing from the list only runs in its usual place.
LONGEST_FIRST = (
    "replication/test_faults.py",  # 153
    "storage/test_log_properties.py",  # 146
    "tools/test_acls_tool.py",  # 129
    "replication/test_replication.py",  # 124
    "tools/test_console.py",  # 96
    "groups/test_group_clients.py",  # 93
    "tools/test_topics.py",  # 86
    "protocol/test_message_roundtrip.py",  # 82
    "tools/test_client_settings.py",  # 67
    "tools/test_configs.py",  # 66
    "protocol/test_against_kafka_python.py",  # 61
    "replication/test_reassignment.py",  # 55
    "cluster/test_zk_sasl.py",  # 55
    "transactions/test_exactly_once.py",  # 47
    "replication/test_elections.py",  # 46
    "broker/test_restarts.py",  # 46
    "tools/test_cluster_tools.py",  # 44
    "tools/test_transactions_tool.py",  # 42
    "broker/test_dev_cluster.py",  # 40
    "replication/test_coordinator_failover.py",  # 37
    "replication/test_zookeeper_partition.py",  # 34
    "tools/test_configs_scram.py",  # 33
    "tools/test_consumer_groups.py",  # 31
    "cluster/test_zk_tls.py",  # 30
)


def pytest_collection_modifyitems(items: list) -> None:
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}

    def position(item) -> int:
        path = item.path.as_posix()
        for name, index in rank.items():
            if path.endswith(name):
                return index
        return len(rank)

    items.sort(key=position)  # stable: every other file keeps its order
