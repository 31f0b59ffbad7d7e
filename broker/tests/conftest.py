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
