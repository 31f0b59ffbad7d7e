"""zookeeper-shell: ZooKeeper's command line client as Kafka ships it (ls, get, stat,
getAcl, create, delete, on a connect string with an optional chroot), through kazoo. One
command from the arguments, or one per line from standard input. `-zk-tls-config-file`
names a properties file with the broker's `zookeeper.ssl.*` keys, for a secure port; the
JAAS `Client` section of the file KAFKA_OPTS names logs in with SASL, as ZooKeeper's own
client does under Kafka's script."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.protocol.states import ZnodeStat

from moldau.cluster import zk_sasl, zk_tls
from moldau.cluster.zk_errors import ZkError
from moldau.security.ssl_settings import TlsConfigError
from moldau.tools.options import ToolError
from moldau.tools.properties import load_properties

USAGE = ("USAGE: zookeeper-shell.sh zookeeper_host:port[/path] [-zk-tls-config-file file] "
         "[args...]")
COMMANDS = ("ZooKeeper -server host:port cmd args\n\tls [-s] [-w] [-R] path\n"
            "\tget [-s] [-w] path\n\tgetAcl [-s] path\n\tstat [-w] path\n"
            "\tcreate [-s] [-e] path [data]\n"
            "\tdelete [-v version] path\n\tquit")


def _java_date(ms: int) -> str:
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(ms / 1000))


def stat_lines(stat: ZnodeStat) -> list[str]:
    """ZooKeeper's StatPrinter."""
    return [f"cZxid = {hex(stat.czxid)}", f"ctime = {_java_date(stat.ctime)}",
            f"mZxid = {hex(stat.mzxid)}", f"mtime = {_java_date(stat.mtime)}",
            f"pZxid = {hex(stat.pzxid)}", f"cversion = {stat.cversion}",
            f"dataVersion = {stat.version}", f"aclVersion = {stat.aversion}",
            f"ephemeralOwner = {hex(stat.ephemeralOwner)}",
            f"dataLength = {stat.dataLength}", f"numChildren = {stat.numChildren}"]


def perm_string(perms: int) -> str:
    """ZooKeeper's letters for a permission mask, in its order (cdrwa)."""
    bits = (("c", 4), ("d", 8), ("r", 1), ("w", 2), ("a", 16))
    return "".join(letter for letter, bit in bits if perms & bit)


def _flags(words: list[str]) -> tuple[set[str], list[str]]:
    flags = {w for w in words if w.startswith("-")}
    return flags, [w for w in words if not w.startswith("-")]


def execute(zk: KazooClient, words: list[str]) -> int:
    """One shell command: its output on stdout, ZooKeeper's errors on stderr."""
    command, rest = words[0], words[1:]
    flags, args = _flags(rest)
    try:
        if command == "ls" and args:
            names = zk.get_children(args[0])
            print("[" + ", ".join(sorted(names)) + "]")
            if "-s" in flags:
                print("\n".join(stat_lines(zk.exists(args[0]))))
        elif command == "get" and args:
            data, stat = zk.get(args[0])
            print("null" if data is None else data.decode("utf-8", "replace"))
            if "-s" in flags:
                print("\n".join(stat_lines(stat)))
        elif command == "getAcl" and args:
            acls, stat = zk.get_acls(args[0])
            for acl in acls:
                print(f"'{acl.id.scheme},'{acl.id.id}\n: {perm_string(acl.perms)}")
            if "-s" in flags:
                print("\n".join(stat_lines(stat)))
        elif command == "stat" and args:
            stat = zk.exists(args[0])
            if stat is None:
                raise NoNodeError
            print("\n".join(stat_lines(stat)))
        elif command == "create" and args:
            data = args[1].encode() if len(args) > 1 else b""
            path = zk.create(args[0], data, ephemeral="-e" in flags, sequence="-s" in flags)
            print(f"Created {path}")
        elif command == "delete" and args:
            zk.delete(args[-1])
        elif command in ("quit", "close"):
            return 0
        else:
            print(COMMANDS, file=sys.stderr)
            return 1
    except NoNodeError:
        print(f"Node does not exist: {args[0]}", file=sys.stderr)
        return 1
    except NodeExistsError:
        print(f"Node already exists: {args[0]}", file=sys.stderr)
        return 1
    except NotEmptyError:
        print(f"Node not empty: {args[-1]}", file=sys.stderr)
        return 1
    except NoAuthError:
        path = args[-1] if command == "delete" else args[0]
        print(f"Insufficient permission : {path}", file=sys.stderr)
        return 1
    return 0


class ZooKeeperShell:
    name = "zookeeper-shell"

    def main(self, argv: Sequence[str] | None = None) -> int:
        argv = list(sys.argv[1:] if argv is None else argv)
        if not argv:
            print(USAGE, file=sys.stderr)
            return 1
        connect, words = argv[0], argv[1:]
        options: dict[str, Any] = {}
        if words[:1] == ["-zk-tls-config-file"]:
            if len(words) < 2:
                print(USAGE, file=sys.stderr)
                return 1
            try:
                options = zk_tls.kazoo_options(load_properties(words[1]))
            except (ToolError, TlsConfigError) as exc:
                print(f"zookeeper-shell: {words[1]}: {exc}", file=sys.stderr)
                return 1
            words = words[2:]
        try:
            # zookeeper-shell.sh runs ZooKeeper's own client: its rules for KAFKA_OPTS
            login = zk_sasl.settings_from_environment(zookeeper_client_rules=True).login
        except zk_sasl.ZkSaslConfigError as exc:
            print(f"zookeeper-shell: {exc}", file=sys.stderr)
            return 1
        if login is not None:
            options["sasl_options"] = login.kazoo_options()
        print(f"Connecting to {connect}")
        zk = KazooClient(hosts=connect, timeout=30, **options)
        outcome = (zk_sasl.SaslOutcome.watch(zk, login.refusal_hint) if login is not None
                   else None)
        try:
            zk_sasl.start_admitted(zk, connect, login, outcome, timeout=15)
        except ZkError as exc:
            print(f"Unable to connect to {connect}: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:  # kazoo's start timeout is not a KazooException
            zk.stop()
            print(f"Unable to connect to {connect}: {exc or 'timed out'}", file=sys.stderr)
            return 1
        try:
            if not words:  # ZooKeeperMain's interactive mode, without jline in Kafka 3.9
                print("Welcome to ZooKeeper!\nJLine support is disabled")
            print("\nWATCHER::\n\nWatchedEvent state:SyncConnected type:None path:null")
            if words:
                return execute(zk, words)
            code = 0
            for line in sys.stdin:
                parts = line.split()
                if parts:
                    code = execute(zk, parts)
                    if parts[0] in ("quit", "close"):
                        break
            return code
        finally:
            zk.stop()
            zk.close()


TOOL = ZooKeeperShell()
