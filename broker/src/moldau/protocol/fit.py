"""Fit a message to one version: fields that version cannot carry go back to their default.

The encoder refuses a non-default value in a field the version lacks (it would be lost
without a word). A sender that fills every field it knows, for several versions at once
(the controller's requests, pinned by inter.broker.protocol.version), calls this first.
"""

from __future__ import annotations

from typing import Any

from ._runtime import in_range


def fit_to_version(message: Any, version: int) -> Any:
    for spec in type(message).FIELDS:
        present = in_range(version, spec.versions) or in_range(version, spec.tagged)
        value = getattr(message, spec.name)
        if not present:
            if spec.type == "array":
                setattr(message, spec.name, [])
            elif spec.type != "struct":
                setattr(message, spec.name, spec.default)
        elif spec.type == "array" and spec.element == "struct" and value:
            for item in value:
                fit_to_version(item, version)
        elif spec.type == "struct" and value is not None:
            fit_to_version(value, version)
    return message
