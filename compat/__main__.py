"""`make compat`: start the reference lab, run the differential scenarios, print the table.

    python -m compat                      every scenario
    python -m compat --fast               the subset for `make test`
    python -m compat --only NAME ...      those (and what they need)
    python -m compat --list               the scenarios and the allowlist, nothing run

Exit status 0 when every scenario is the same on both brokers or differs only as the
allowlist says; 1 otherwise. Transcripts and logs stay in --dir (a temporary directory
by default, kept when something failed).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from compat import allowlist, launcher, report, scenarios
from compat.lab import Lab
from compat.runner import Runner


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="NAME")
    parser.add_argument("--fast", action="store_true", help="only the make-test subset")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--dir", type=Path, help="keep the lab and transcripts here")
    options = parser.parse_args(argv)

    entries = allowlist.load()
    chosen = scenarios.select(options.only, options.fast)
    if options.list:
        for scenario in chosen:
            print(f"{scenario.name:32} {'fast' if scenario.fast else 'slow'}  "
                  f"{scenario.summary}")
        print(report.allowlist_summary(entries, []))
        return 0

    directory = options.dir or Path(tempfile.mkdtemp(prefix="moldau-compat-"))
    started = time.monotonic()
    try:
        lab = Lab.start(directory / "lab", with_acl_pair=scenarios.need_acl_pair(chosen),
                        with_trio=scenarios.need_trio(chosen))
    except launcher.LabSetupError as exc:
        print(f"compat: {exc}", file=sys.stderr)
        return 2
    print(f"lab up in {time.monotonic() - started:.0f} s: Kafka {launcher.KAFKA_VERSION} at "
          f"{lab.kafka.bootstrap}, Moldau at {lab.moldau.bootstrap}"
          + (f"; ACL pair: Kafka at {lab.acl_pair.kafka.bootstrap}, Moldau at "
             f"{lab.acl_pair.moldau.bootstrap}" if lab.acl_pair else "")
          + ("; three brokers of each kind" if lab.trio else "")
          + f" ({directory})", flush=True)
    try:
        runner = Runner(lab, entries, directory)
        results = []
        for scenario in chosen:
            result = runner.run(scenario)
            print(f"  {scenario.name}: {result.verdict.value} ({result.seconds:.1f} s)",
                  flush=True)
            results.append(result)
    finally:
        lab.stop()
    print()
    print(report.table(results))
    print()
    print(report.allowlist_summary(entries, results))
    failed = report.failures(results)
    if failed:
        print()
        print(failed)
        print(f"\ntranscripts and logs: {directory}")
    elif options.dir is None:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"\ncompat: {len(results)} scenarios in {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
