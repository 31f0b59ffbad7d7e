"""The broker role's health gate, run on a broker host with the broker's own venv:
is this broker registered in /brokers/ids, and is every partition's ISR as large as its
replica set? It reads ZooKeeper, where the controller records ISRs, with the
zookeeper.connect (chroot included) of the broker's server.properties.

With --wait SECONDS it is the whole gate in one run: it reads systemd's NRestarts of the
unit first and checks every --interval seconds until the broker is healthy or the time
is up (one process and one ZooKeeper session per gate, not one per attempt).

Exit codes: 0 healthy, 1 not (the reasons on stdout), 2 ZooKeeper unreachable or the
file unreadable, 4 the service exited since the gate began (systemd's NRestarts grew past
the count at the start, or --restarts): waiting longer is pointless, a crash loop does
not heal. `--controller` prints the controller's broker id (or -1) instead."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from moldau.cluster import zk_data, zk_sasl, zk_tls
from moldau.cluster.zk_errors import ZkError
from moldau.security.kerberos_login import KerberosLoginError
from moldau.security.ssl_settings import TlsConfigError
from moldau.tools.options import ToolError
from moldau.tools.properties import load_properties


def under_replicated(zk: KazooClient) -> list[str]:
    """'topic-partition isr=[..] replicas=[..]' for each partition short of replicas."""
    problems = []
    for topic in sorted(zk.get_children(zk_data.TOPICS_PATH)):
        try:
            assignment = json.loads(zk.get(zk_data.topic_path(topic))[0])["partitions"]
        except (NoNodeError, KeyError, ValueError):
            continue  # a topic being created or deleted
        for partition, replicas in sorted(assignment.items(), key=lambda kv: int(kv[0])):
            try:
                state = json.loads(zk.get(zk_data.partition_state_path(topic, int(partition)))[0])
            except NoNodeError:
                problems.append(f"{topic}-{partition} has no state yet (no leader elected)")
                continue
            if len(state["isr"]) < len(replicas) or state["leader"] < 0:
                problems.append(f"{topic}-{partition} leader={state['leader']} "
                                f"isr={state['isr']} replicas={replicas}")
    return problems


def service_start_time(unit: str) -> float | None:
    """When the unit's main process started (seconds since the epoch), from /proc."""
    try:
        shown = subprocess.run(["systemctl", "show", "-p", "MainPID", "--value", unit],
                               capture_output=True, text=True, check=False)
        pid = int(shown.stdout.strip() or 0)
        if pid <= 0:
            return None
        with open(f"/proc/{pid}/stat") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as fh:
            boot = next(float(line.split()[1]) for line in fh if line.startswith("btime "))
    except (OSError, ValueError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def registration_problem(zk: KazooClient, broker_id: int, unit: str) -> str | None:
    """Why /brokers/ids/<id> does not show this broker's current run, if it does not: a
    registration older than the running process belongs to a previous run whose
    ZooKeeper session has not expired yet (after a crash or a power loss)."""
    stat = zk.exists(zk_data.broker_path(broker_id))
    if stat is None:
        return f"broker {broker_id} is not registered in {zk_data.BROKER_IDS_PATH}"
    started = service_start_time(unit)
    if started is not None and stat.ctime / 1000 < started - 2:
        return (f"broker {broker_id}'s registration is from a previous run (its ZooKeeper "
                "session has not expired yet)")
    return None


def unit_restarts(unit: str) -> int:
    try:
        shown = subprocess.run(["systemctl", "show", "-p", "NRestarts", "--value", unit],
                               capture_output=True, text=True, check=False)
        return int(shown.stdout.strip() or 0)
    except (OSError, ValueError):  # no systemd here: no restarts to count
        return 0


def controller_id(zk: KazooClient) -> int:
    try:
        return int(json.loads(zk.get(zk_data.CONTROLLER_PATH)[0])["brokerid"])
    except NoNodeError:
        return -1


# The unit's environment file beside server.properties (the broker role writes it when
# ZooKeeper takes SASL): KAFKA_OPTS naming the JAAS file with the Client section.
ENV_FILE = "moldau-broker.env"


def kafka_opts(properties: str) -> str:
    """KAFKA_OPTS as the broker runs with it: the environment's when set, else the one
    of the unit's environment file beside server.properties (so these scripts log in to
    ZooKeeper as the running broker does, also before and after the file appears)."""
    if "KAFKA_OPTS" in os.environ:
        return os.environ["KAFKA_OPTS"]
    path = os.path.join(os.path.dirname(os.path.abspath(properties)), ENV_FILE)
    try:
        with open(path, encoding="utf-8") as file:
            for line in file:
                key, sep, value = line.strip().partition("=")
                if sep and key.strip() == "KAFKA_OPTS":
                    return " ".join(shlex.split(value))  # systemd's quotes off
    except FileNotFoundError:
        pass
    return ""


def connect(properties: str) -> tuple[KazooClient | None, dict[str, str], str]:
    """A started ZooKeeper client for the broker's zookeeper.connect (chroot included) and
    the properties, with the broker's TLS and SASL identity; (None, {}, why) when the
    files or ZooKeeper fail."""
    try:
        props = load_properties(properties)
        options: dict[str, object] = dict(zk_tls.kazoo_options(props))  # TLS if the broker has it
        login = zk_sasl.settings_from_kafka_opts(kafka_opts(properties)).login
    except (ToolError, TlsConfigError, ValueError, OSError) as exc:
        return None, {}, f"cannot read {exc}"
    if login is not None:  # SASL when the broker uses it (DIGEST-MD5 or Kerberos)
        try:
            login.log_in()
        except KerberosLoginError as exc:
            return None, {}, str(exc)
        options["sasl_options"] = login.kazoo_options()
    zk = KazooClient(hosts=props["zookeeper.connect"], read_only=False, **options)
    outcome = zk_sasl.SaslOutcome.watch(zk, login.refusal_hint) if login is not None else None
    try:
        # a refused session (no SASL where ZooKeeper requires it, a wrong login) fails
        # here with the reason, not later as a dead session
        zk_sasl.start_admitted(zk, props["zookeeper.connect"], login, outcome, timeout=15)
    except ZkError as exc:
        return None, {}, f"ZooKeeper {props['zookeeper.connect']} refused the session: {exc}"
    except Exception as exc:  # kazoo raises its own timeout type
        return None, {}, f"ZooKeeper {props['zookeeper.connect']} unreachable: {exc}"
    return zk, props, ""


class Gate:
    """The checks of one gate over one ZooKeeper session, opened at the first check."""

    def __init__(self, properties: str, unit: str) -> None:
        self.properties = properties
        self.unit = unit
        self.zk: KazooClient | None = None
        self.props: dict[str, str] = {}

    def check(self) -> tuple[int, str]:
        """One look: (exit code, what to print)."""
        if self.zk is None:
            self.zk, self.props, why = connect(self.properties)
            if self.zk is None:
                return 2, why
        broker_id = int(self.props["broker.id"])
        try:
            stale = registration_problem(self.zk, broker_id, self.unit)
            problems = [stale] if stale else []
            problems += under_replicated(self.zk)
        except KazooException as exc:  # the session is reconnecting: look again
            return 2, f"ZooKeeper read failed: {exc!r}"
        return (1, "\n".join(problems)) if problems else (0, f"broker {broker_id} healthy")

    def close(self) -> None:
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()


def crash_loop(unit: str, restarts: int) -> str | None:
    """Why waiting is pointless, when systemd restarted the unit since the gate began."""
    now = unit_restarts(unit)
    if now > restarts:
        return (f"{unit} exited and systemd restarted it {now - restarts} time(s) "
                "since the gate began (a crash loop): see its log lines")
    return None


def wait_healthy(check: Callable[[], tuple[int, str]], crashed: Callable[[], str | None],
                 wait: float, interval: float,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> tuple[int, str]:
    """Checks until healthy, a crash loop, or `wait` seconds are over; the last answer."""
    deadline = clock() + wait
    while True:
        reason = crashed()
        if reason:
            return 4, reason
        code, text = check()
        if code == 0 or clock() >= deadline:
            return code, text
        sleep(max(0.0, min(interval, deadline - clock())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("properties", help="the broker's server.properties")
    parser.add_argument("--controller", action="store_true", help="print the controller id")
    parser.add_argument("--unit", default="moldau-broker", help="the broker's systemd unit")
    parser.add_argument("--restarts", type=int, default=None,
                        help="systemd's NRestarts of the unit when the gate began "
                             "(default: when this run began)")
    parser.add_argument("--wait", type=float, default=0.0,
                        help="seconds to keep checking until the broker is healthy")
    parser.add_argument("--interval", type=float, default=0.5,
                        help="seconds between two checks while waiting")
    args = parser.parse_args(argv)
    if args.controller:
        zk, _, why = connect(args.properties)
        if zk is None:
            print(why)
            return 2
        try:
            print(controller_id(zk))
            return 0
        finally:
            zk.stop()
            zk.close()
    restarts = args.restarts if args.restarts is not None else unit_restarts(args.unit)
    gate = Gate(args.properties, args.unit)
    try:
        code, text = wait_healthy(gate.check, lambda: crash_loop(args.unit, restarts),
                                  args.wait, args.interval)
    finally:
        gate.close()
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
