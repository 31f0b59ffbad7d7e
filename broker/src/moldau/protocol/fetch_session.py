"""The epochs of KIP-227's incremental fetch sessions, as both sides count them (Kafka's
FetchMetadata): a session starts at epoch 0, a fetch that closes it carries -1, and the
epoch after the largest int32 is 1."""

from __future__ import annotations

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
INT32_MAX = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch` (wraps to 1, never back to the initial 0)."""
    return 1 if epoch >= INT32_MAX else epoch + 1
