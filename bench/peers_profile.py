"""Where the broker's CPU goes under the peers' produce and fetch workloads (issue 12).

One Moldau broker, a topic of 1 partition, 1 KiB records: kcat produces
MOLDAU_BENCH_PEERS_RECORDS records, then reads them back from the start, while py-spy
samples the broker (`py-spy record --nonblocking --format raw`, 250 Hz, active threads
only). The tables give each function's share of the samples: *own* where the sample's
innermost frame was that function, *inclusive* where it was anywhere on the stack.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import _peer_servers as ps
import _support as s
import peers

ORDER = 111
RATE_HZ = 250
TOP = 12
REPEAT = 3  # runs of each workload under one recording, for enough samples
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
# Frames every sample has (the event loop, the entry point): no information in them.
_PLUMBING = ("asyncio/", "runpy", "moldau/server/main.py", "selectors.py", "threading.py",
             "concurrent/futures")


def stop_spy(spy: subprocess.Popen[bytes]) -> None:
    """Stop a py-spy recording (SIGINT makes it write its output), killing it if it hangs."""
    spy.send_signal(signal.SIGINT)
    try:
        spy.wait(60)
    except subprocess.TimeoutExpired:
        spy.kill()
        spy.wait(10)


def _py_spy() -> str:
    # the bench extra installs py-spy into the virtualenv next to this Python
    venv = Path(sys.executable).parent / "py-spy"
    return str(venv) if venv.exists() else shutil.which("py-spy") or "py-spy"


def _frame(raw: str) -> str:
    m = _FRAME.match(raw.strip())
    if not m:
        return raw.strip()
    where = m["file"]
    for marker in ("site-packages/", "/src/", "python3.11/"):
        if marker in where:
            where = where.split(marker, 1)[1]
    return f"{m['func']} ({where})"


def parse(raw: str) -> tuple[int, Counter[str], Counter[str]]:
    """Samples, own and inclusive counts per frame from py-spy's collapsed stacks.

    Samples whose innermost frame is the event loop's select are waits for the network
    (py-spy does not always see them as idle): they are left out."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame(f) for f in stack.split(";")]
        # the first frame is the thread ("process 123:..." or "thread (0x...)"): skip it
        frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        if not frames or frames[-1].startswith("EpollSelector.select"):
            continue
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    return total, own, inclusive


def record(pid: int, out: Path, workload: object) -> tuple[str, float]:
    """Run workload() under py-spy; (collapsed stacks, the workload's seconds)."""
    spy = subprocess.Popen([_py_spy(), "record", "--pid", str(pid), "--rate", str(RATE_HZ),
                            "--nonblocking", "--format", "raw", "--output", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # py-spy attaches
    t0 = time.perf_counter()
    workload()  # type: ignore[operator]
    seconds = time.perf_counter() - t0
    stop_spy(spy)
    if not out.exists():
        err = spy.stderr.read().decode() if spy.stderr else ""
        raise RuntimeError(f"py-spy wrote no profile: {err.strip()}")
    return out.read_text(), seconds


def _table(total: int, own: Counter[str], inclusive: Counter[str]) -> str:
    rows = [[f"`{name}`", f"{100 * n / total:.1f}%"] for name, n in own.most_common(TOP)]
    left = s.table(["function (own time)", "share of samples"], rows)
    useful = [(name, n) for name, n in inclusive.most_common()
              if not any(p in name for p in _PLUMBING)][:TOP]
    rows = [[f"`{name}`", f"{100 * n / total:.1f}%"] for name, n in useful]
    right = s.table(["function (inclusive, without the event loop)", "share of samples"], rows)
    return f"{left}\n\n{right}"


def run() -> str:
    clock = s.Stopwatch()
    quick = s.RUNS < 10
    count = 20_000 if quick else peers.RECORDS
    ps.install_packages()
    servers = ps.Servers(peers=False).start()
    sections = []
    try:
        moldau = servers.systems[peers.MOLDAU]
        rdkperf = ps.build_rdkperf()
        topic = "profile"
        produced: list[peers.Sample] = []
        consumed: list[peers.Sample] = []

        def produce() -> None:
            for i in range(REPEAT):
                produced.append(peers.rdkperf_produce(servers, rdkperf, f"{topic}{i}", 1,
                                                      count, create=False))

        def fetch() -> None:
            for i in range(REPEAT):
                consumed.append(peers.kcat_consume(servers, f"{topic}{i}", count))

        for i in range(REPEAT):  # before the sampling: not the controller's work
            servers.create_topic(f"{topic}{i}", 1)
        time.sleep(2.0)
        raw, _ = record(moldau.pid, servers.workdir / "produce.txt", produce)
        sections.append(("produce", _median(produced), parse(raw)))
        raw, _ = record(moldau.pid, servers.workdir / "fetch.txt", fetch)
        sections.append(("fetch", _median(consumed), parse(raw)))
    finally:
        servers.stop()
    lines = [
        "## Profile of the broker under the peers' workloads (issue 12)",
        "",
        f"py-spy {_version()} sampling the broker at {RATE_HZ} Hz without pausing it "
        f"(`py-spy record --pid <broker> --rate {RATE_HZ} --nonblocking --format raw`), "
        f"while rdkperf produces {count:,} records of {peers.SIZE} B into a topic of 1 "
        "partition, "
        f"{REPEAT} times (a topic each) "
        "(acks=1, linger.ms 5, 1 MiB batches), then kcat reads them back from the start (the "
        "commands of the peers section). Shares are of the samples in which a broker thread "
        "was running (idle waits are not sampled; samples in the event loop's select, waits "
        "for the network, are left out too); the sampler takes some CPU of the 2 cores "
        "too, so the rates below are a little lower than the peers section's.",
        "",
    ]
    for name, sample, (total, own, inclusive) in sections:
        lines += [
            f"### {name}: {sample.mb_s:.0f} MB/s (median of {REPEAT} runs), broker CPU "
            f"{sample.server_cpu * 100:.0f}%, {total:,} samples",
            "",
            _table(total, own, inclusive),
            "",
        ]
    lines.append(s.environment(clock, ["py-spy", "confluent-kafka"]))
    return "\n".join(lines)


def _median(samples: list[peers.Sample]) -> peers.Sample:
    return sorted(samples, key=lambda x: x.mb_s)[len(samples) // 2]


def _version() -> str:
    return ps.version([_py_spy(), "--version"]).replace("py-spy ", "")


if __name__ == "__main__":
    print(run())
