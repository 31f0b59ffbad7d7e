"""Coverage-guided fuzzing of Moldau's request decoding with atheris (libFuzzer for Python).

Each target (request_properties.py says what each checks) runs in a process of its own
for --budget-seconds, starting from a corpus of valid encodings (seed_corpus.py), with
libFuzzer's per-input time limit (--timeout-seconds) turning a hang into a finding.
A finding is saved under the artifacts directory, printed as a Python bytes literal
ready for broker/tests/protocol/test_fuzz_regressions.py, and fails the run.

    .venv/bin/python broker/fuzz/fuzz_requests.py                     # every target, 60 s each
    .venv/bin/python broker/fuzz/fuzz_requests.py --target bodies --budget-seconds 600 \\
        --corpus-dir /tmp/moldau-corpus                              # keep what it learns
    .venv/bin/python broker/fuzz/fuzz_requests.py --target records --replay crash-5eed...
    .venv/bin/python broker/fuzz/fuzz_requests.py --check-seeds       # no atheris needed

atheris comes with the `fuzz` extra of broker/pyproject.toml (`make fuzz-deps`).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

TARGET_NAMES = ("frames", "requests", "bodies", "records", "produce_fast")
# Longest input per target: requests and bodies of the registered APIs fit in 4 KiB with
# room to grow; frames need several frames and one over half the scratch buffer; record
# seeds hold compressed batches.
MAX_LEN = {"frames": 8192, "requests": 4096, "bodies": 4096, "records": 8192,
           "produce_fast": 4096}
ARTIFACT_KINDS = ("crash", "timeout", "oom", "leak", "slow-unit")
# Start-up (instrumenting the protocol package) and shutdown, over the budget, before
# the parent gives up on a child: libFuzzer itself stops at its budget.
CHILD_GRACE_SECONDS = 300


@dataclass
class Outcome:
    target: str
    returncode: int
    seconds: float
    runs: int | None
    execs_per_second: int | None
    coverage: str
    findings: list[Path]

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and not self.findings


def _checks() -> dict[str, Callable[[bytes], None]]:
    import request_properties  # late: the child first imports moldau.protocol instrumented

    return request_properties.TARGETS


# --- the child: one target under libFuzzer ------------------------------------------------


def fuzz_child(target: str, libfuzzer_args: Sequence[str]) -> None:
    import atheris

    # Coverage comes from moldau.protocol only, the decoders under test. atheris
    # instruments whole top-level packages, so the protocol modules are imported (the
    # message classes are otherwise loaded lazily) while the hook is on, and the rest of
    # moldau that the properties import (the API table) after it is off.
    with atheris.instrument_imports(include=["moldau"]):
        from moldau.protocol import compression, framing, headers, legacy, records
        from moldau.protocol.generated.api import APIS

        for spec in APIS.values():
            spec.request  # noqa: B018  # imports the class's module
        del compression, framing, headers, legacy, records
    if target == "produce_fast":
        # the parser alone: instrumenting the server package it imports costs a minute
        from moldau.server.handlers import produce_fast

        atheris.instrument_func(produce_fast.parse)
        atheris.instrument_func(produce_fast._parse)
    check = _checks()[target]
    atheris.Setup([sys.argv[0], *libfuzzer_args], check)
    atheris.Fuzz()  # exits the process when the budget is spent or a finding is saved


# --- the parent: seeds, children, findings ------------------------------------------------


def _stat(log: str, name: str) -> int | None:
    found = re.findall(rf"stat::{name}:\s+(\d+)", log)
    return int(found[-1]) if found else None


def _coverage(log: str) -> str:
    found = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)/", log)
    if not found:
        return "-"
    cov, features, corpus = found[-1]
    return f"cov {cov}, ft {features}, corpus {corpus}"


def run_target(target: str, budget: int, timeout: int, corpus_root: Path,
               artifacts_root: Path) -> Outcome:
    from seed_corpus import write_corpus

    corpus = corpus_root / target
    artifacts = artifacts_root / target
    artifacts.mkdir(parents=True, exist_ok=True)
    seeded = write_corpus(target, corpus)
    log_path = artifacts / "libfuzzer.log"
    command = [sys.executable, __file__, "--libfuzzer-child", target, "--", str(corpus),
               f"-max_total_time={budget}", f"-timeout={timeout}",
               f"-max_len={MAX_LEN[target]}", f"-artifact_prefix={artifacts}/",
               "-print_final_stats=1", "-use_value_profile=1", "-rss_limit_mb=2048"]
    print(f"--- {target}: {seeded} seeds in {corpus}, {budget} s, log {log_path}", flush=True)
    started = time.monotonic()
    with log_path.open("w") as log_file:
        try:
            returncode = subprocess.run(command, stdout=log_file, stderr=subprocess.STDOUT,
                                        timeout=budget + CHILD_GRACE_SECONDS).returncode
        except subprocess.TimeoutExpired:
            returncode = -1
    seconds = time.monotonic() - started
    log = log_path.read_text(errors="replace")
    findings = sorted(p for p in artifacts.iterdir() if p.name.startswith(ARTIFACT_KINDS))
    if returncode != 0 and not findings:
        print(log[-4000:])  # a child that failed without a finding: say why
    return Outcome(target, returncode, seconds, _stat(log, "number_of_executed_units"),
                   _stat(log, "average_exec_per_sec"), _coverage(log), findings)


def describe_finding(target: str, path: Path) -> None:
    """Print a finding as a regression test needs it, and why it fails."""
    data = path.read_bytes()
    print(f"\n{target}: {path.name} ({len(data)} bytes)\n    {data!r}")
    if path.name.startswith("crash"):  # a timeout would hang the replay too
        replay(target, [path])


def replay(target: str, paths: Sequence[Path]) -> bool:
    check = _checks()[target]
    ok = True
    for path in paths:
        try:
            check(path.read_bytes())
        except Exception:
            ok = False
            print(f"{path}: FAILS")
            traceback.print_exc(file=sys.stdout)
        else:
            print(f"{path}: passes")
    return ok


def check_seeds(targets: Sequence[str]) -> bool:
    """Every target's property on its seeds, without atheris: the harness works."""
    from seed_corpus import seeds

    checks = _checks()
    ok = True
    for target in targets:
        started = time.monotonic()
        inputs = seeds(target)
        for data in inputs:
            try:
                checks[target](data)
            except Exception:
                ok = False
                print(f"{target}: a seed fails: {data!r}")
                traceback.print_exc(file=sys.stdout)
        print(f"{target}: {len(inputs)} seeds checked in {time.monotonic() - started:.1f} s")
    return ok


def report(outcomes: Sequence[Outcome]) -> None:
    print(f"\n{'target':<12} {'result':<8} {'seconds':>8} {'runs':>10} {'exec/s':>8}  coverage")
    for o in outcomes:
        result = "passed" if o.passed else "FAILED"
        runs = f"{o.runs:,}" if o.runs is not None else "-"
        rate = f"{o.execs_per_second:,}" if o.execs_per_second is not None else "-"
        print(f"{o.target:<12} {result:<8} {o.seconds:>8.0f} {runs:>10} {rate:>8}  {o.coverage}")
    for o in outcomes:
        for path in o.findings:
            describe_finding(o.target, path)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--libfuzzer-child"]:
        fuzz_child(args[1], args[3:])  # args[2] is "--"
        return 0
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", action="append", choices=TARGET_NAMES,
                        help="a target to run (repeatable; default: all)")
    parser.add_argument("--budget-seconds", type=int, default=60,
                        help="fuzzing time per target (default 60)")
    parser.add_argument("--timeout-seconds", type=int, default=2,
                        help="longest one input may take before it counts as a hang")
    parser.add_argument("--corpus-dir", type=Path,
                        help="keep the corpus here across runs (default: a new temporary one)")
    parser.add_argument("--artifacts-dir", type=Path,
                        help="where findings and logs go (default: a new temporary directory)")
    parser.add_argument("--check-seeds", action="store_true",
                        help="only check each target's property on its seeds, without atheris")
    parser.add_argument("--replay", type=Path, nargs="+", metavar="FILE",
                        help="run one --target's property on these inputs")
    options = parser.parse_args(args)
    targets = options.target or list(TARGET_NAMES)
    if options.check_seeds:
        return 0 if check_seeds(targets) else 1
    if options.replay:
        if len(targets) != 1:
            parser.error("--replay needs exactly one --target")
        return 0 if replay(targets[0], options.replay) else 1
    work = Path(tempfile.mkdtemp(prefix="moldau-fuzz-"))
    corpus_root = options.corpus_dir or work / "corpus"
    artifacts_root = options.artifacts_dir or work / "artifacts"
    outcomes = [run_target(t, options.budget_seconds, options.timeout_seconds, corpus_root,
                           artifacts_root) for t in targets]
    report(outcomes)
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
