"""What one small request costs the broker (issue 4's latency goal): the broker's CPU per
pipelined ProduceRequest, next to the least a Python asyncio server spends per request
(bench/drivers/frame_echo.py) measured in the same run.

At a fixed 20 MB/s of 1 KiB records with linger.ms 0, librdkafka sends a request per
partition as soon as it has a record, so its batches hold a record or two and the
broker sees 10,000 to 20,000 requests a second: the broker keeps up only if a request
costs it well under 100 us, and once it falls behind, latency is queueing.

Each run sends REQUESTS ProduceRequests v9 (acks=1, one partition of a 6-partition
topic, round-robin, a batch of 5 x 1 KiB records: what librdkafka sends at that rate)
over one connection, WINDOW of them in flight, and reads the answers on a second
thread; then the same with acks=all (librdkafka's and the Java client's default; with
one replica the records are committed on append). The figure is the server process's
CPU seconds (user + system, from /proc) divided by the requests. ROUNDS rounds, the
runs rotating; medians.

The callgrind mode (`python bench/request_cost.py --callgrind`, or MOLDAU_BENCH_CALLGRIND=1
for `bench/run.py --only request_cost`) counts instructions instead of CPU time, which a
busy machine does not disturb: the broker and the floor run under `valgrind
--tool=callgrind` with instrumentation off, and `callgrind_control` switches it on only
around the measured requests, after a warm-up. The figure is the instructions executed
(Ir, every thread of the server) divided by the requests. Python under callgrind runs
tens of times slower, so a run is CALLGRIND_REQUESTS requests, and the ZooKeeper session
and the start-up waits are stretched to match. `--java` sends the requests Kafka's Java
producer sends instead (issue 42): v11, one request for two partitions of the topic
(what a broker leading two of the six gets), each a batch of 5 x 1 KiB records.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import _support as s
from _peer_servers import cpu_seconds, install_packages

if TYPE_CHECKING:
    from moldau.devcluster.brokers import BrokerProcess

ORDER = 31  # after the broker section
REQUESTS = 40_000
WINDOW = 32
ROUNDS = int(os.environ.get("MOLDAU_BENCH_ROUNDS", 5))
PARTITIONS = 6
TOPIC = "request-cost"
RUNS = ("broker", "broker acks=all", "floor")
ACL_RUN = "broker with ACLs"

CALLGRIND_REQUESTS = 2_000
CALLGRIND_WARMUP = 500  # per run, uncounted: metadata, index entries, valgrind's JIT
CALLGRIND_ROUNDS = 2
# Under callgrind the broker is tens of times slower: its ZooKeeper session (ZooKeeper caps it at
# 20 ticks), its start and the topic's creation get minutes instead of seconds.
CALLGRIND_ZK_TICK_MS = 6000
CALLGRIND_SESSION_MS = 120_000
CALLGRIND_START_SECONDS = 900.0


def _frames(acks: int, java: bool = False) -> list[bytes]:
    """librdkafka's requests (v9, one partition each) or, with java, the Java producer's
    (v11, two partitions each)."""
    from moldau.protocol.generated import ProduceRequest, RequestHeader
    from moldau.protocol.generated.api import ApiKey
    from moldau.protocol.headers import encode_request
    from moldau.protocol.records import build_batch

    value = os.urandom(1024)
    frames = []
    together = 2 if java else 1  # partitions per request
    for i in range(PARTITIONS * 4):
        body = ProduceRequest(acks=acks, timeout_ms=30000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                ProduceRequest.PartitionProduceData(
                    index=(i * together + j) % PARTITIONS,
                    records=build_batch([(None, value)] * 5))
                for j in range(together)])])
        header = RequestHeader(request_api_key=ApiKey.PRODUCE,
                               request_api_version=11 if java else 9,
                               correlation_id=i, client_id="request-cost")
        frames.append(encode_request(header, body))
    return frames


def drive(address: tuple[str, int], frames: list[bytes], requests: int,
          pid: int) -> tuple[float, float]:
    """(server CPU us per request, requests per second) for `requests` pipelined frames."""
    sock = socket.create_connection(address)
    window = threading.Semaphore(WINDOW)

    def read_answers() -> None:
        stream = sock.makefile("rb")
        for _ in range(requests):
            (size,) = struct.unpack(">i", stream.read(4))
            stream.read(size)
            window.release()

    reader = threading.Thread(target=read_answers)
    reader.start()
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    for i in range(requests):
        window.acquire()
        sock.sendall(frames[i % len(frames)])
    reader.join()
    seconds, cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
    sock.close()
    return cpu / requests * 1e6, requests / seconds


def _start_floor(workdir: Path, launcher: Sequence[str] = (), timeout: float = 30,
                 env: dict[str, str] | None = None,
                 ) -> tuple[subprocess.Popen[bytes], tuple[str, int]]:
    port_file = workdir / "echo.port"
    driver = Path(__file__).parent / "drivers" / "frame_echo.py"
    process = subprocess.Popen([*launcher, sys.executable, str(driver), str(port_file)],
                               env=env)
    deadline = time.monotonic() + timeout
    while not port_file.exists() or not port_file.read_text():
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError("frame_echo.py did not start")
        time.sleep(0.05)
    return process, ("127.0.0.1", int(port_file.read_text()))


def run() -> str:
    if os.environ.get("MOLDAU_BENCH_CALLGRIND") == "1":
        return run_callgrind()
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from confluent_kafka.admin import AdminClient, NewTopic

    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
    from moldau.devcluster.brokers import BrokerProcess

    clock = s.Stopwatch()
    quick = s.RUNS < 10
    requests = 4000 if quick else REQUESTS
    rounds = 1 if quick else ROUNDS
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-request-cost-"))
    ensemble = ZooKeeperEnsemble(workdir / "zk", size=1, die_with_parent=True).start()
    broker = BrokerProcess(str(workdir / "broker"), 1, ensemble.connect_string + "/bench",
                           properties=dict(s.AUTOTUNED_SOCKETS))
    floor: subprocess.Popen[bytes] | None = None
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in RUNS}
    try:
        floor, floor_address = _start_floor(workdir)
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(60)
        host, port = broker.bootstrap.split(":")
        pid = broker.pid()
        assert pid is not None
        address = (host, int(port))
        targets: dict[str, tuple[tuple[str, int], int, list[bytes]]] = {
            "broker": (address, pid, _frames(1)), "broker acks=all": (address, pid, _frames(-1)),
            "floor": (floor_address, floor.pid, _frames(1))}
        drive(address, targets["broker"][2], 1000, pid)  # warm: metadata, first index entries
        for r in range(rounds):
            for name in RUNS[r % len(RUNS):] + RUNS[:r % len(RUNS)]:
                target, target_pid, frames = targets[name]
                results[name].append(drive(target, frames, requests, target_pid))
    finally:
        if floor is not None:
            floor.kill()
        broker.stop()
        ensemble.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return _report(clock, requests, results)


LIBRDKAFKA_RATE = 19_500  # requests/s librdkafka sends at 20 MB/s (linger.ms 0)


def _capacity_note(per_core: float) -> str:
    text = ("At 20 MB/s of 1 KiB records over 6 partitions librdkafka sends up to "
            f"{LIBRDKAFKA_RATE:,} requests a second; at the median cost above one core (the "
            f"broker's event loop) serves at most {per_core:,.0f} a second, ")
    if per_core < LIBRDKAFKA_RATE:
        return text + "so the latency section's confluent-kafka p99 is queueing in the broker."
    return text + (f"{per_core / LIBRDKAFKA_RATE:.1f} times that rate: on a core of its own, "
                   "the CPU of a small acks=1 request alone no longer makes a queue at that "
                   "rate (on 2 cores the broker shares them with the client, and replication "
                   "makes acks=all requests dearer: they wait for the followers' fetches).")


def _report(clock: s.Stopwatch, requests: int,
            results: dict[str, list[tuple[float, float]]]) -> str:
    def median(name: str, index: int) -> float:
        return statistics.median(r[index] for r in results[name])

    def spread(name: str) -> str:
        values = sorted(r[0] for r in results[name])
        return f"{values[0]:.0f}-{values[-1]:.0f}"

    def ratio(name: str) -> str:
        ratios = [b[0] / f[0] for b, f in zip(results[name], results["floor"], strict=True)]
        return f"{statistics.median(ratios):.1f}x"

    labels = {
        "broker": "Moldau broker (ProduceRequest v9, acks=1, appended to the log)",
        "broker acks=all": "Moldau broker (the same with acks=all, one replica)",
        "floor": "floor: frame_echo.py (asyncio, frames cut and answered, nothing else)",
    }
    rows: list[tuple[str, ...]] = [
        (labels[name], f"{median(name, 0):.0f}", spread(name), f"{median(name, 1):,.0f}",
         ratio(name)) for name in RUNS]
    text = [
        "## Cost of a small request (issue 4)",
        "",
        f"{requests:,} pipelined ProduceRequests v9 per run ({WINDOW} in flight, one "
        f"connection), each one partition of a {PARTITIONS}-partition topic with a batch "
        "of 5 x 1 KiB records, acks=1: what librdkafka sends at 20 MB/s with linger.ms 0; "
        "then the same with acks=all (the clients' default; one replica, so committed on "
        "append). CPU: the server process's user + system seconds per request. "
        f"{len(results['broker'])} rounds, the runs rotating; medians.",
        "",
        s.table(("server", "CPU us per request", "rounds", "requests/s", "vs floor"), rows),
        "",
        _capacity_note(1e6 / median("broker", 0)),
        "",
        s.environment(clock, ["confluent-kafka"]),
    ]
    return "\n".join(text)


# --- the callgrind mode ------------------------------------------------------------------


def callgrind_launcher(out_prefix: Path) -> list[str]:
    """The command prefix that runs a program under callgrind, counting nothing until
    CallgrindControl.instructions() switches instrumentation on."""
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no",
            f"--callgrind-out-file={out_prefix}.%p"]


def callgrind_env() -> dict[str, str]:
    # A fixed hash seed: the same dict and set layouts, so the same instructions, each run.
    return dict(os.environ, PYTHONHASHSEED="0")


class CallgrindControl:
    """Counts the instructions a process under callgrind executes while `work` runs."""

    def __init__(self, pid: int, out_prefix: Path) -> None:
        self.pid = pid
        self.out_prefix = out_prefix

    def _control(self, option: str) -> None:
        subprocess.run(["callgrind_control", option, str(self.pid)], check=True,
                       capture_output=True, timeout=300)

    def _dumps(self) -> set[Path]:
        return set(self.out_prefix.parent.glob(f"{self.out_prefix.name}.{self.pid}.*"))

    def instructions(self, work: Callable[[], object]) -> int:
        self._control("--zero")
        self._control("--instr=on")
        before = self._dumps()
        try:
            work()
            # before switching off, which discards what was counted; a dump also zeroes
            self._control("--dump=measured")
        finally:
            self._control("--instr=off")
        (dump,) = self._dumps() - before
        match = re.search(r"^summary: (\d+)", dump.read_text(), re.MULTILINE)
        if match is None:
            raise RuntimeError(f"no instruction count in {dump}")
        return int(match.group(1))


def _start_broker_under_callgrind(broker: BrokerProcess, out_prefix: Path) -> None:
    """BrokerProcess.start(), with the broker under callgrind and a longer wait."""
    broker.write_config()
    os.makedirs(broker.log_dir, exist_ok=True)
    env = dict(callgrind_env(), LOG_DIR=broker.log_dir)
    with open(os.path.join(broker.log_dir, "stdout.log"), "ab") as log:
        broker.process = subprocess.Popen(
            [*callgrind_launcher(out_prefix), sys.executable, "-m", "moldau.server.main",
             broker.config_path],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
            preexec_fn=broker._preexec())  # BrokerProcess's own: it dies with us
    broker.wait_healthy(CALLGRIND_START_SECONDS)


def seed_acls(connect: str, chroot: str, count: int) -> None:
    """`count` ACLs in Kafka's znodes under `chroot`, of which 10 apply to the producer
    (User:ANONYMOUS on TOPIC and the cluster) and the rest to other principals, topics
    and prefixes: what the authorizer searches when it decides the producer's WRITE."""
    from moldau.authorizer.acl_authorizer import AclAuthorizer
    from moldau.cluster.zk_client import KafkaZkClient
    from moldau.security.acls import (
        AccessControlEntry,
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourceType,
    )

    allow = AclPermissionType.ALLOW
    me = "User:ANONYMOUS"
    topic = ResourcePattern(ResourceType.TOPIC, TOPIC, PatternType.LITERAL)
    cluster = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)
    prefix = ResourcePattern(ResourceType.TOPIC, TOPIC[:8], PatternType.PREFIXED)
    mine = [AclBinding(topic, AccessControlEntry(me, "*", AclOperation.WRITE, allow)),
            AclBinding(topic, AccessControlEntry(me, "*", AclOperation.DESCRIBE, allow)),
            AclBinding(topic, AccessControlEntry(me, "127.0.0.1", AclOperation.WRITE, allow)),
            AclBinding(topic, AccessControlEntry(me, "*", AclOperation.ALTER, allow)),
            AclBinding(prefix, AccessControlEntry(me, "*", AclOperation.WRITE, allow)),
            AclBinding(prefix, AccessControlEntry(me, "*", AclOperation.READ, allow)),
            AclBinding(cluster, AccessControlEntry(me, "*", AclOperation.CREATE, allow)),
            AclBinding(cluster, AccessControlEntry(me, "*", AclOperation.DESCRIBE, allow)),
            AclBinding(cluster, AccessControlEntry(me, "*", AclOperation.IDEMPOTENT_WRITE,
                                                   allow)),
            AclBinding(cluster, AccessControlEntry(me, "*", AclOperation.ALTER_CONFIGS, allow))]
    others = [AclBinding(ResourcePattern(ResourceType.TOPIC, f"other-{i % 300}",
                                         PatternType.PREFIXED if i % 3 == 0
                                         else PatternType.LITERAL),
                         AccessControlEntry(f"User:user{i}", "*", AclOperation.READ, allow))
              for i in range(max(count - len(mine), 0))]
    client = KafkaZkClient(connect, chroot)
    client.start()
    try:
        authorizer = AclAuthorizer.from_zk_client(client)
        authorizer.start()
        try:
            errors = [e for e in authorizer.create_acls(mine + others) if e is not None]
            if errors:
                raise RuntimeError(f"could not seed the ACLs: {errors[0]}")
        finally:
            authorizer.close()
    finally:
        client.close()


def run_callgrind(requests: int = CALLGRIND_REQUESTS, rounds: int = CALLGRIND_ROUNDS,
                  acls: int = 0, java: bool = False) -> str:
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from confluent_kafka.admin import AdminClient, NewTopic

    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
    from moldau.devcluster.brokers import BrokerProcess

    if shutil.which("callgrind_control") is None:
        install_packages()  # valgrind is among the bench's Debian packages
    clock = s.Stopwatch()
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-request-cost-callgrind-"))
    ensemble = ZooKeeperEnsemble(workdir / "zk", size=1, tick_time=CALLGRIND_ZK_TICK_MS,
                                 die_with_parent=True).start()
    broker = BrokerProcess(
        str(workdir / "broker"), 1, ensemble.connect_string + "/bench",
        properties={**s.AUTOTUNED_SOCKETS,
                    "zookeeper.session.timeout.ms": str(CALLGRIND_SESSION_MS)})
    # with --acls: a second broker with Kafka's AclAuthorizer and that many ACLs
    guarded = None
    if acls:
        seed_acls(ensemble.connect_string, "/bench-acls", acls)
        guarded = BrokerProcess(
            str(workdir / "guarded"), 1, ensemble.connect_string + "/bench-acls",
            properties={**s.AUTOTUNED_SOCKETS,
                        "zookeeper.session.timeout.ms": str(CALLGRIND_SESSION_MS),
                        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    runs = RUNS + ((ACL_RUN,) if guarded is not None else ())
    floor: subprocess.Popen[bytes] | None = None
    results: dict[str, list[float]] = {name: [] for name in runs}
    try:
        floor, floor_address = _start_floor(
            workdir, callgrind_launcher(workdir / "callgrind.floor"), CALLGRIND_START_SECONDS,
            callgrind_env())
        _start_broker_under_callgrind(broker, workdir / "callgrind.broker")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(
            CALLGRIND_START_SECONDS)
        host, port = broker.bootstrap.split(":")
        pid = broker.pid()
        assert pid is not None
        address = (host, int(port))
        in_broker = CallgrindControl(pid, workdir / "callgrind.broker")
        in_floor = CallgrindControl(floor.pid, workdir / "callgrind.floor")
        targets: dict[str, tuple[tuple[str, int], CallgrindControl, list[bytes]]] = {
            "broker": (address, in_broker, _frames(1, java)),
            "broker acks=all": (address, in_broker, _frames(-1, java)),
            "floor": (floor_address, in_floor, _frames(1))}
        if guarded is not None:
            _start_broker_under_callgrind(guarded, workdir / "callgrind.guarded")
            guarded_admin = AdminClient({"bootstrap.servers": guarded.bootstrap})
            guarded_admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(
                CALLGRIND_START_SECONDS)
            guarded_host, guarded_port = guarded.bootstrap.split(":")
            guarded_pid = guarded.pid()
            assert guarded_pid is not None
            targets[ACL_RUN] = ((guarded_host, int(guarded_port)),
                                CallgrindControl(guarded_pid, workdir / "callgrind.guarded"),
                                _frames(1))
        for target, control, frames in targets.values():
            drive(target, frames, CALLGRIND_WARMUP, control.pid)
        for r in range(rounds):
            for name in runs[r % len(runs):] + runs[:r % len(runs)]:
                target, control, frames = targets[name]
                count = control.instructions(
                    partial(drive, target, frames, requests, control.pid))
                results[name].append(count / requests)
                print(f"{name}: {count / requests:,.0f} instructions per request",
                      file=sys.stderr, flush=True)
    finally:
        if floor is not None:
            floor.kill()
        broker.stop(CALLGRIND_START_SECONDS)
        if guarded is not None:
            guarded.stop(CALLGRIND_START_SECONDS)
        ensemble.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return _callgrind_report(clock, requests, results, acls, java)


def _valgrind_version() -> str:
    out = subprocess.run(["valgrind", "--version"], capture_output=True, text=True)
    return out.stdout.strip()


def _callgrind_report(clock: s.Stopwatch, requests: int,
                      results: dict[str, list[float]], acls: int = 0,
                      java: bool = False) -> str:
    shape = ("v11, two partitions of 5 x 1 KiB records (Kafka's Java producer)" if java
             else "v9")
    labels = {
        "broker": f"Moldau broker (ProduceRequest {shape}, acks=1, appended to the log)",
        "broker acks=all": "Moldau broker (the same with acks=all, one replica)",
        "floor": "floor: frame_echo.py (asyncio, frames cut and answered, nothing else)",
        ACL_RUN: f"Moldau broker with the AclAuthorizer and {acls:,} ACLs (10 apply to the "
                 "producer), acks=1",
    }
    floor = statistics.median(results["floor"])
    rows: list[tuple[str, ...]] = []
    for name in results:
        values = results[name]
        middle = statistics.median(values)
        spread = (max(values) - min(values)) / middle * 100
        rows.append((labels[name], f"{middle:,.0f}", " / ".join(f"{v:,.0f}" for v in values),
                     f"{spread:.2f}%", f"{middle / floor:.1f}x"))
    text = [
        "## Instructions per small request (issue 4, callgrind)",
        "",
        f"{requests:,} pipelined ProduceRequests v9 per run ({WINDOW} in flight, one "
        f"connection), as in the CPU figures, with the server under callgrind: the "
        "instructions executed by all its threads while it handled them (Ir), per request. "
        f"Instrumentation is on only around the measured requests, after "
        f"{CALLGRIND_WARMUP:,} uncounted ones per run. Rounds: {len(results['broker'])}, "
        "the runs rotating; medians, each round, and the spread between rounds.",
        "",
        s.table(("server", "instructions per request", "rounds", "spread", "vs floor"),
                rows),
        "",
        *([f"With {acls:,} ACLs each request costs "
           f"{statistics.median(results[ACL_RUN]) / statistics.median(results['broker']):.3f}"
           " times the instructions of the broker without an authorizer (issue 36 asks "
           "for at most 1.05: decisions are cached until an ACL changes).", ""]
          if ACL_RUN in results else []),
        s.environment(clock, ["confluent-kafka"]) + f"\n- Valgrind: {_valgrind_version()}",
    ]
    return "\n".join(text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--callgrind", action="store_true",
                        help="count instructions per request under callgrind")
    parser.add_argument("--requests", type=int, default=CALLGRIND_REQUESTS,
                        help=f"callgrind mode: requests per run (default {CALLGRIND_REQUESTS})")
    parser.add_argument("--rounds", type=int, default=CALLGRIND_ROUNDS,
                        help=f"callgrind mode: rounds (default {CALLGRIND_ROUNDS})")
    parser.add_argument("--acls", type=int, default=0,
                        help="callgrind mode: also a broker with the AclAuthorizer and this "
                        "many ACLs (e.g. 1000)")
    parser.add_argument("--java", action="store_true",
                        help="callgrind mode: the Java producer's requests (v11, two "
                        "partitions each)")
    args = parser.parse_args(argv)
    print(run_callgrind(args.requests, args.rounds, args.acls, args.java) if args.callgrind
          else run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
