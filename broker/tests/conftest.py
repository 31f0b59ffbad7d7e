"""Test-wide settings.

Hypothesis explores new random examples on every local run, which is how it finds bugs;
CI (`CI` set by .ci/run) runs a derandomized profile instead, so a landing is never
decided by the luck of one draw. A failure found locally prints a reproducible blob.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
from zk_fixtures import zk_chroot, zk_client, zk_ensemble  # noqa: F401, E402  (ZooKeeper fixtures)
