"""The authorizer's decision log: logger `kafka.authorizer.logger`, one line per decision in
Kafka 3.9's words (AclAuthorizer.logAuditMessage), so log filters written for Kafka match:

    Principal = User:x is Denied Operation = Read from host = 10.0.0.1 on resource =
    Topic:LITERAL:t for request = Fetch with resourceRefCount = 1

Levels as Kafka's: a denial the request asked for at INFO, an allowed access at DEBUG, and a
decision that only filters or fills an authorized-operations field at TRACE.
"""

from __future__ import annotations

import logging

from moldau.security.acls import Action, PatternType

audit_log = logging.getLogger("kafka.authorizer.logger")

# log4j's TRACE, below DEBUG (Python has no level of that name)
TRACE = 5
logging.addLevelName(TRACE, "TRACE")


def audit_level(action: Action, allowed: bool) -> int:
    if allowed:
        return logging.DEBUG if action.log_if_allowed else TRACE
    return logging.INFO if action.log_if_denied else TRACE


def log_decision(principal: str, host: str, request_name: str, action: Action, allowed: bool,
                 pattern_type: PatternType = PatternType.LITERAL) -> None:
    """Log one decision, when the logger takes its level (checked first: this runs for every
    resource of every request)."""
    level = audit_level(action, allowed)
    if not audit_log.isEnabledFor(level):
        return
    audit_log.log(
        level,
        "Principal = %s is %s Operation = %s from host = %s on resource = %s:%s:%s for request "
        "= %s with resourceRefCount = %d",
        principal, "Allowed" if allowed else "Denied", action.operation.pascal_name, host,
        action.resource_type.pascal_name, pattern_type.name, action.name, request_name,
        action.reference_count)
