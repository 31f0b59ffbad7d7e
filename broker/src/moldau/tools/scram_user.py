"""SCRAM credentials in ZooKeeper made to match what an inventory declares, without
rewriting the ones that already do: how the playbooks issue the inter-broker, admin and
application users (docs/distribution.md, "SASL").

Every write of a SCRAM credential draws a new random salt, so writing on every run would
change the stored form (and send every broker a change notification) although nothing
changed. This tool reads `/config/users/<user>`, keeps a credential whose salted form was
made from the declared password with the declared iterations
(scram_credentials.password_matches), and writes only the others, through
KafkaZkClient.update_user_config: the one writer of that znode, whose compare-and-set keeps
the user's other keys (quotas). It is run on a broker host with the broker's venv and
reaches ZooKeeper as `kafka-configs --zookeeper` does (TLS settings from a
--zk-tls-config-file such as the broker's server.properties), so it works before any
broker runs.

  python -m moldau.tools.scram_user --zookeeper HOST:PORT[,...][/chroot]
      [--zk-tls-config-file FILE]
      --user NAME --mechanism SCRAM-SHA-512 [--mechanism ...] [--iterations N]
      [--password-file FILE] [--delete]
  python -m moldau.tools.scram_user --zookeeper ... --users-file FILE|-

Passwords never travel on the command line: with --user the password is read from
--password-file or else from standard input (one trailing newline dropped); --users-file
is a JSON list of users, read from standard input when FILE is `-`:

  [{"name": "broker", "password": "...", "mechanisms": ["SCRAM-SHA-512"], "iterations": 8192},
   {"name": "retired", "state": "absent", "mechanisms": ["SCRAM-SHA-512"]}]

`iterations` defaults to 4096 (Kafka's default) and must lie within 4096..16384;
`state` is `present` (the default) or `absent` (the credentials of those mechanisms are
removed, the user's other keys kept).

Output, one line per user and mechanism, then a last line for Ansible's changed_when:
  kept: user 'broker' SCRAM-SHA-512 (the stored credential matches)
  written: user 'broker' SCRAM-SHA-512 (8192 iterations)
  deleted: user 'retired' SCRAM-SHA-512
  absent: user 'retired' SCRAM-SHA-512 (no credential to delete)
  changed | unchanged
No password or credential is ever printed.

Exit codes: 0 done (changed or not); 1 ZooKeeper unreachable, refused, or its TLS settings
unusable; 2 invalid input (options, users file, password), nothing written.
"""

from __future__ import annotations

import argparse
import enum
import getpass
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TextIO

from kazoo.exceptions import KazooException

from moldau.cluster.zk_client import ZkError
from moldau.security.sasl.scram_credentials import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISM_NAMES,
    CredentialFormatError,
    ScramCredential,
    ScramMechanism,
    derive_credential,
    password_matches,
)
from moldau.tools.configs_users import open_zookeeper
from moldau.tools.options import ToolError
from moldau.tools.zk_tool_cli import EXIT_INPUT, EXIT_OK, EXIT_ZOOKEEPER, zk_tool_parser

CHANGED, UNCHANGED = "changed", "unchanged"
DEFAULT_USER_ENTITY = "<default>"  # the default user's znode: quotas only, no credentials


class InputError(ValueError):
    """Options, a users file or a password that cannot be used; nothing was written."""


class UserConfigStore(Protocol):
    """What this tool needs of KafkaZkClient (a fake in the unit tests)."""

    def get_user_config(self, user: str) -> dict[str, str]: ...

    def update_user_config(self, user: str,
                           change: Callable[[dict[str, str]], dict[str, str]]) -> str: ...

    def ensure_persistent_paths(self) -> None: ...


@dataclass(frozen=True)
class DesiredUser:
    """One user as the inventory declares it."""

    name: str
    mechanisms: tuple[ScramMechanism, ...]
    password: str | None  # None exactly when the user is absent
    iterations: int = DEFAULT_ITERATIONS

    @property
    def present(self) -> bool:
        return self.password is not None


class Action(enum.Enum):
    KEEP = "kept"
    WRITE = "written"
    DELETE = "deleted"
    ABSENT = "absent"

    @property
    def changes(self) -> bool:
        return self in (Action.WRITE, Action.DELETE)


def desired_user(name: str, mechanisms: Sequence[str], password: str | None,
                 iterations: int = DEFAULT_ITERATIONS) -> DesiredUser:
    """A validated DesiredUser (password None: the user's credentials are to go)."""
    if not name:
        raise InputError("a user name must not be empty")
    if name == DEFAULT_USER_ENTITY:
        raise InputError(f"{DEFAULT_USER_ENTITY} is the default user entity of quotas; it "
                         "cannot hold SCRAM credentials")
    if not mechanisms:
        raise InputError(f"user '{name}': name at least one mechanism "
                         f"({', '.join(SCRAM_MECHANISM_NAMES)})")
    chosen: list[ScramMechanism] = []
    for text in mechanisms:
        mechanism = ScramMechanism.by_name(text)
        if mechanism is None:
            raise InputError(f"user '{name}': unknown SCRAM mechanism {text!r}; use "
                             f"{', '.join(SCRAM_MECHANISM_NAMES)} (case-sensitive)")
        if mechanism not in chosen:
            chosen.append(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise InputError(f"user '{name}': iterations {iterations} is outside "
                         f"{MIN_ITERATIONS}..{MAX_ITERATIONS}")
    if password is not None and not password:
        raise InputError(f"user '{name}': the password is empty")
    return DesiredUser(name, tuple(chosen), password, iterations)


def stored_matches(stored: str | None, mechanism: ScramMechanism, user: DesiredUser) -> bool:
    """Whether a stored credential value was made from the user's password with the
    user's iterations (a malformed value never matches: it is rewritten)."""
    if stored is None or user.password is None:
        return False
    try:
        credential = ScramCredential.from_config_value(stored)
    except CredentialFormatError:
        return False
    return (credential.iterations == user.iterations
            and password_matches(mechanism, credential, user.password))


def plan(config: Mapping[str, str], user: DesiredUser) -> dict[ScramMechanism, Action]:
    """What each of the user's mechanisms needs, given its stored config map."""
    actions = {}
    for mechanism in user.mechanisms:
        stored = config.get(mechanism.mechanism_name)
        if user.present:
            matches = stored_matches(stored, mechanism, user)
            actions[mechanism] = Action.KEEP if matches else Action.WRITE
        else:
            actions[mechanism] = Action.ABSENT if stored is None else Action.DELETE
    return actions


def apply(store: UserConfigStore, user: DesiredUser) -> dict[ScramMechanism, Action]:
    """Bring one user's credentials to what is declared; writes only when something
    differs. Returns what was done per mechanism."""
    actions = plan(store.get_user_config(user.name), user)
    if not any(action.changes for action in actions.values()):
        return actions
    fresh: dict[ScramMechanism, str] = {}  # salted once: a retried write writes the same

    def credential(mechanism: ScramMechanism) -> str:
        if mechanism not in fresh:
            password = str(user.password)  # a WRITE is planned for present users only
            fresh[mechanism] = derive_credential(mechanism, password,
                                                 user.iterations).to_config_value()
        return fresh[mechanism]

    def change(config: dict[str, str]) -> dict[str, str]:
        # decided again on the map being replaced: it may have changed since the read
        actions.clear()
        actions.update(plan(config, user))
        for mechanism, action in actions.items():
            if action is Action.WRITE:
                config[mechanism.mechanism_name] = credential(mechanism)
            elif action is Action.DELETE:
                del config[mechanism.mechanism_name]
        return config

    # a first write on a fresh ZooKeeper: /config and /config/users with Kafka's ACLs,
    # not those of the user's znode (which its parents would otherwise inherit)
    store.ensure_persistent_paths()
    store.update_user_config(user.name, change)
    return actions


def report_lines(user: DesiredUser, actions: Mapping[ScramMechanism, Action]) -> list[str]:
    details = {Action.KEEP: " (the stored credential matches)",
               Action.WRITE: f" ({user.iterations} iterations)",
               Action.DELETE: "",
               Action.ABSENT: " (no credential to delete)"}
    return [f"{action.value}: user '{user.name}' {mechanism.mechanism_name}{details[action]}"
            for mechanism, action in actions.items()]


# ------------------------------------------------------------------------------- input


def users_from_document(text: str, source: str) -> list[DesiredUser]:
    """The users of a --users-file (a JSON list of objects)."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{source}: not JSON ({exc})") from None
    if not isinstance(document, list):
        raise InputError(f"{source}: expected a JSON list of users")
    users = []
    known = {"name", "password", "mechanisms", "iterations", "state"}
    for index, item in enumerate(document):
        where = f"{source}: user #{index + 1}"
        if not isinstance(item, dict):
            raise InputError(f"{where} is not an object")
        unknown = sorted(set(item) - known)
        if unknown:
            raise InputError(f"{where}: unknown keys {unknown} (known: {sorted(known)})")
        name, mechanisms = item.get("name"), item.get("mechanisms")
        state, iterations = item.get("state", "present"), item.get("iterations",
                                                                   DEFAULT_ITERATIONS)
        password = item.get("password")
        if not isinstance(name, str):
            raise InputError(f"{where}: 'name' must be a string")
        if not isinstance(mechanisms, list) or not all(isinstance(m, str) for m in mechanisms):
            raise InputError(f"{where} ('{name}'): 'mechanisms' must be a list of names")
        if state not in ("present", "absent"):
            raise InputError(f"{where} ('{name}'): 'state' must be present or absent")
        if type(iterations) is not int:
            raise InputError(f"{where} ('{name}'): 'iterations' must be an integer")
        if state == "present" and not isinstance(password, str):
            raise InputError(f"{where} ('{name}'): a present user needs a 'password' string")
        users.append(desired_user(name, mechanisms,
                                  password if state == "present" else None, iterations))
    names = [u.name for u in users]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"{source}: users declared more than once: {twice}")
    return users


def read_password(path: str | None, stdin: TextIO) -> str:
    """The password of --password-file, else of standard input (a prompt on a terminal);
    one trailing newline is not part of it."""
    try:
        if path is not None:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        elif stdin.isatty():
            text = getpass.getpass("Password: ")
        else:
            text = stdin.read()
    except OSError as exc:
        raise InputError(f"cannot read the password: {path}: {exc.strerror}") from None
    return text.removesuffix("\n").removesuffix("\r")


def read_users(options: argparse.Namespace, stdin: TextIO) -> list[DesiredUser]:
    if options.users_file is not None:
        if options.user or options.mechanism or options.password_file or options.delete:
            raise InputError("--users-file declares every user: do not combine it with "
                             "--user, --mechanism, --password-file or --delete")
        source = "standard input" if options.users_file == "-" else options.users_file
        try:
            if options.users_file == "-":
                text = stdin.read()
            else:
                with open(options.users_file, encoding="utf-8") as file:
                    text = file.read()
        except OSError as exc:
            raise InputError(f"cannot read {source}: {exc.strerror}") from None
        return users_from_document(text, source)
    if options.user is None:
        raise InputError("name the user (--user NAME) or give a --users-file")
    if options.delete and options.password_file:
        raise InputError("--delete takes no password")
    password = None if options.delete else read_password(options.password_file, stdin)
    return [desired_user(options.user, options.mechanism or [], password,
                         options.iterations)]


# ---------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = zk_tool_parser("python -m moldau.tools.scram_user",
                            "SCRAM credentials in ZooKeeper, written only where the stored "
                            "one does not match (see the module docstring)")
    parser.add_argument("--user", help="the user (SCRAM username)")
    parser.add_argument("--mechanism", action="append", choices=SCRAM_MECHANISM_NAMES,
                        help="a SCRAM mechanism to hold a credential for (repeatable)")
    parser.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                        help=f"PBKDF2 iterations ({MIN_ITERATIONS}..{MAX_ITERATIONS}, "
                             f"default {DEFAULT_ITERATIONS})")
    parser.add_argument("--password-file", help="file holding the password (else stdin)")
    parser.add_argument("--delete", action="store_true",
                        help="remove the user's credentials of these mechanisms")
    parser.add_argument("--users-file",
                        help="JSON list of users ('-': standard input) instead of --user")
    return parser


def _open_store(connect: str, tls_config_file: str | None) -> tuple[UserConfigStore,
                                                                    Callable[[], None]]:
    """A started ZooKeeper session as kafka-configs --zookeeper opens one, and its close."""
    zk = open_zookeeper(connect, tls_config_file)
    return zk, zk.close


def main(argv: Sequence[str] | None = None, stdin: TextIO | None = None,
         stdout: TextIO | None = None, stderr: TextIO | None = None,
         open_store: Callable[[str, str | None],
                              tuple[UserConfigStore, Callable[[], None]]] = _open_store
         ) -> int:
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    options = _parser().parse_args(argv)
    try:
        users = read_users(options, stdin)
    except InputError as exc:
        print(f"scram_user: {exc}", file=stderr)
        return EXIT_INPUT
    try:
        store, close = open_store(options.zookeeper, options.zk_tls_config_file)
    except ToolError as exc:
        print(f"scram_user: ZooKeeper {options.zookeeper}: {exc}", file=stderr)
        return EXIT_ZOOKEEPER
    changed = False
    try:
        for user in users:
            actions = apply(store, user)
            for line in report_lines(user, actions):
                print(line, file=stdout)
            changed = changed or any(a.changes for a in actions.values())
    except (ZkError, ToolError, KazooException) as exc:
        # e.g. NoAuthError: the znodes belong to another ZooKeeper identity
        reason = str(exc) or type(exc).__name__
        print(f"scram_user: ZooKeeper {options.zookeeper}: {reason}", file=stderr)
        return EXIT_ZOOKEEPER
    finally:
        close()
    print(CHANGED if changed else UNCHANGED, file=stdout)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
