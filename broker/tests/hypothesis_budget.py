"""How many examples a property test draws. A test that names its own number (a costly
property, or one that needs more than the default) gets it in a routine run and ten times
it under `make test-long`'s `long` profile: an explicit `max_examples` overrides the
profile's, so without this those tests would draw no more in the long run than in CI."""

from __future__ import annotations

import os

LONG_RUN_FACTOR = 10


def examples(count: int) -> int:
    return count * (LONG_RUN_FACTOR if os.environ.get("HYPOTHESIS_PROFILE") == "long" else 1)
