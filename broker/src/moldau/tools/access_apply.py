"""The principals, ACLs and quotas an inventory declares, made true in ZooKeeper: how the
access role applies `broker_sasl_users`, `kafka_acls` and `kafka_quotas`
(docs/distribution.md, "Principals, ACLs and quotas").

It works on ZooKeeper, as `kafka-acls --authorizer-properties` and `kafka-configs
--zookeeper` do, not through the Admin API: so it runs before any broker does (the
inter-broker user and the seed ACLs exist when the brokers start, the way Kafka's
procedure turns the authorizer on), needs no admin login the authorizer could refuse,
and the brokers still pick every change up within a second (Kafka's change
notifications, written by the same stores the brokers use).

  python -m moldau.tools.access_apply --zookeeper HOST:PORT[,...][/chroot]
      [--zk-tls-config-file FILE] [--desired-state FILE|-] [--dry-run]

The desired state (access_state.py, access_quotas.py) is read from a file or standard
input, never from the command line: it holds passwords. Everything is checked before
anything is written.

Users: scram_user.py's rules (a credential whose stored salted form matches is kept).
ACLs: declared entries missing from the cluster are added, one compare-and-set write per
resource pattern; entries the cluster has and the inventory does not declare are kept and
reported, and removed only with `"acls_exclusive": true`. Quotas: declared keys set
(one compare-and-set write per entity, a user's credentials kept), undeclared ones kept
and reported unless `"quotas_exclusive": true`. --dry-run reads and reports the
same and writes nothing (Ansible's check mode).

Output: one JSON object on standard output, no secret in it:
  {"changed": true, "dry_run": false,
   "users": [{"user": "alice", "mechanism": "SCRAM-SHA-512", "action": "written"}],
   "acls_added": [<acl>...], "acls_removed": [<acl>...], "acls_kept": 3,
   "quotas_set": [<quota>...], "quotas_removed": [{"entity": {...}, "keys": [...]}],
   "quotas_kept": 1,
   "drift": {"acls": [<acl>...], "quotas": [<quota>...], "users": ["bob"]}}
with each <acl> and <quota> in the inventory's form; `drift` lists what the cluster had
and the inventory does not declare (ACLs, quota keys, users holding SCRAM credentials).

Exit codes: 0 done (changed or not); 1 ZooKeeper unreachable, refused, or its TLS settings
unusable; 2 invalid desired state, nothing written.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

from kazoo.exceptions import KazooException

from moldau.authorizer.acl_store import AclStore
from moldau.cluster.zk_client import KafkaZkClient, ZkError
from moldau.errors import KafkaError
from moldau.security.acls import AccessControlEntry, ResourcePattern
from moldau.security.sasl.scram_credentials import SCRAM_MECHANISM_NAMES
from moldau.tools import scram_user
from moldau.tools.access_quotas import (
    apply_quotas,
    plan_quotas,
    quota_documents,
    removal_documents,
    stored_quotas,
)
from moldau.tools.access_state import DesiredState, acl_document, bindings, desired_state
from moldau.tools.configs_users import open_zookeeper
from moldau.tools.options import ToolError
from moldau.tools.scram_user import DesiredUser, InputError
from moldau.tools.zk_tool_cli import EXIT_INPUT, EXIT_OK, EXIT_ZOOKEEPER, zk_tool_parser

AclMap = Mapping[ResourcePattern, frozenset[AccessControlEntry]]


@dataclass(frozen=True)
class AclPlan:
    """What the ACLs need: entries to add and to remove per pattern, and the drift (what
    the cluster has beyond the declaration, removed or not)."""

    add: dict[ResourcePattern, frozenset[AccessControlEntry]]
    remove: dict[ResourcePattern, frozenset[AccessControlEntry]]
    undeclared: dict[ResourcePattern, frozenset[AccessControlEntry]]
    kept: int


def plan_acls(current: AclMap, desired: AclMap, exclusive: bool) -> AclPlan:
    add = {pattern: missing for pattern, entries in desired.items()
           if (missing := entries - current.get(pattern, frozenset()))}
    undeclared = {pattern: extra for pattern, entries in current.items()
                  if (extra := entries - desired.get(pattern, frozenset()))}
    kept = sum(len(entries & current.get(pattern, frozenset()))
               for pattern, entries in desired.items())
    return AclPlan(add, dict(undeclared) if exclusive else {}, undeclared, kept)


def _change(add: frozenset[AccessControlEntry], remove: frozenset[AccessControlEntry]
            ) -> Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]:
    return lambda entries: (entries | add) - remove


def apply_acls(store: AclStore, plan: AclPlan) -> tuple[AclMap, AclMap]:
    """Write the plan, one compare-and-set update per pattern (re-decided on the entries
    found at write time, so a concurrent writer's other entries stay); returns what was
    really added and removed."""
    added: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    removed: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    patterns = sorted(plan.add.keys() | plan.remove.keys(),
                      key=lambda p: (p.resource_type.value, p.name, p.pattern_type.value))
    if patterns:
        store.create_paths()
    for pattern in patterns:
        before, after = store.update(pattern, _change(plan.add.get(pattern, frozenset()),
                                                      plan.remove.get(pattern, frozenset())))
        if after.entries - before.entries:
            added[pattern] = after.entries - before.entries
        if before.entries - after.entries:
            removed[pattern] = before.entries - after.entries
    return added, removed


def apply_users(zk: KafkaZkClient, users: Sequence[DesiredUser], dry_run: bool
                ) -> list[dict[str, str]]:
    """scram_user's apply (or only its plan), one report row per user and mechanism."""
    rows = []
    for user in users:
        if dry_run:
            actions = scram_user.plan(zk.get_user_config(user.name), user)
        else:
            actions = scram_user.apply(zk, user)
        rows += [{"user": user.name, "mechanism": mechanism.mechanism_name,
                  "action": action.value} for mechanism, action in actions.items()]
    return rows


def undeclared_users(zk: KafkaZkClient, users: Sequence[DesiredUser]) -> list[str]:
    """Users holding a SCRAM credential in ZooKeeper that the inventory does not name."""
    declared = {user.name for user in users}
    return sorted(name for name, config in zk.get_all_user_configs().items()
                  if name not in declared and any(key in config
                                                  for key in SCRAM_MECHANISM_NAMES))


def run(zk: KafkaZkClient, state: DesiredState, dry_run: bool) -> dict[str, object]:
    """Compare, apply unless dry_run, and the report (see the module docstring)."""
    user_rows = apply_users(zk, state.users, dry_run)
    drift_users = undeclared_users(zk, state.users)
    store = AclStore(zk.kazoo)
    current = {pattern: acls.entries for pattern, acls in store.read_all().items()}
    plan = plan_acls(current, state.acls, state.acls_exclusive)
    added, removed = (plan.add, plan.remove) if dry_run else apply_acls(store, plan)
    quotas = plan_quotas(stored_quotas(zk), state.quotas, state.quotas_exclusive)
    if not dry_run:
        apply_quotas(zk, quotas)
    changes = {scram_user.Action.WRITE.value, scram_user.Action.DELETE.value}
    changed = bool(added or removed or quotas.set or quotas.remove
                   or any(row["action"] in changes for row in user_rows))
    return {"changed": changed, "dry_run": dry_run, "users": user_rows,
            "acls_added": [acl_document(b) for b in bindings(added)],
            "acls_removed": [acl_document(b) for b in bindings(removed)],
            "acls_kept": plan.kept,
            "quotas_set": quota_documents(quotas.set),
            "quotas_removed": removal_documents(quotas.remove),
            "quotas_kept": quotas.kept,
            "drift": {"acls": [acl_document(b) for b in bindings(plan.undeclared)],
                      "quotas": quota_documents(quotas.undeclared),
                      "users": drift_users}}


# ---------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = zk_tool_parser("python -m moldau.tools.access_apply",
                            "Principals, ACLs and quotas in ZooKeeper made to match a "
                            "declared state (see the module docstring)")
    parser.add_argument("--desired-state", default="-",
                        help="JSON file of the desired state ('-', the default: stdin)")
    parser.add_argument("--dry-run", action="store_true",
                        help="report what would change and write nothing")
    return parser


def _read(path: str, stdin: TextIO) -> str:
    try:
        if path == "-":
            return stdin.read()
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None


def main(argv: Sequence[str] | None = None, stdin: TextIO | None = None,
         stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    options = _parser().parse_args(argv)
    source = "standard input" if options.desired_state == "-" else options.desired_state
    try:
        state = desired_state(_read(options.desired_state, stdin), source)
    except InputError as exc:
        print(f"access_apply: {exc}", file=stderr)
        return EXIT_INPUT
    try:
        zk = open_zookeeper(options.zookeeper, options.zk_tls_config_file)
    except ToolError as exc:
        print(f"access_apply: ZooKeeper {options.zookeeper}: {exc}", file=stderr)
        return EXIT_ZOOKEEPER
    try:
        report = run(zk, state, options.dry_run)
    except (ZkError, ToolError, KafkaError, KazooException) as exc:
        # e.g. NoAuthError: the znodes belong to another ZooKeeper identity
        reason = str(exc) or type(exc).__name__
        print(f"access_apply: ZooKeeper {options.zookeeper}: {reason}", file=stderr)
        return EXIT_ZOOKEEPER
    finally:
        zk.close()
    print(json.dumps(report, sort_keys=True), file=stdout)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
