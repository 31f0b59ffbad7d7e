"""The controller's checks of an UpdateFeatures request (KafkaController.processFeatureUpdates
in ZooKeeper mode), as a pure function of the request and the finalized features.

A ZooKeeper-mode broker supports no feature, so any upgrade or downgrade ends in "not
supported" and the only update that can succeed is the deletion of a finalized feature
somebody wrote into /feature by hand.
"""

from __future__ import annotations

from typing import NamedTuple

UNKNOWN, UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 0, 1, 2, 3  # FeatureUpdate.UpgradeType
NOT_SUPPORTED = ("Could not apply finalized feature update because the provided feature is "
                 "not supported.")


class FeatureUpdate(NamedTuple):
    feature: str
    max_version_level: int
    upgrade_type: int


def upgrade_type(version: int, allow_downgrade: bool, requested: int) -> int:
    """UpdateFeatures v0 says allow_downgrade; v1 names the type."""
    if version == 0:
        return SAFE_DOWNGRADE if allow_downgrade else UPGRADE
    return requested


def plan(updates: list[FeatureUpdate], existing: dict[str, int]
         ) -> tuple[dict[str, int], dict[str, str]]:
    """(the finalized features after the valid updates, the refused ones: feature -> why,
    each an INVALID_REQUEST)."""
    target = dict(existing)
    refused: dict[str, str] = {}
    for update in updates:
        why = _refusal(update, existing.get(update.feature))
        if why is not None:
            refused[update.feature] = why
        else:  # only a deletion gets here: no level can be supported
            target.pop(update.feature, None)
    return target, refused


def _refusal(update: FeatureUpdate, existing: int | None) -> str | None:
    level, kind = update.max_version_level, update.upgrade_type
    if not update.feature:
        return "Feature name can not be empty."
    if kind == UNKNOWN or kind > UNSAFE_DOWNGRADE:
        return "Received unknown upgrade type."
    if level < 1 and kind != UPGRADE:  # a deletion
        return None if existing is not None else "Can not delete non-existing finalized feature."
    if level < 1:
        return (f"Can not provide maxVersionLevel: {level} less than 1 without setting the "
                "SAFE downgradeType in the request.")
    if existing is not None:
        if level == existing:
            verb = "downgrade" if kind == SAFE_DOWNGRADE else "upgrade"
            return (f"Can not {verb} a finalized feature from existing maxVersionLevel:"
                    f"{existing} to the same value.")
        if level < existing and kind != SAFE_DOWNGRADE:
            return (f"Can not downgrade finalized feature from existing maxVersionLevel:"
                    f"{existing} to provided maxVersionLevel:{level} without setting the "
                    "downgradeType to SAFE in the request.")
        if kind != UPGRADE and level > existing:
            return (f"When the downgradeType is set to SAFE in the request, the provided "
                    f"maxVersionLevel:{level} can not be greater than existing "
                    f"maxVersionLevel:{existing}.")
    return NOT_SUPPORTED
