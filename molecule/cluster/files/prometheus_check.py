"""Checks of the monitoring host through the real Prometheus and Alertmanager HTTP APIs,
run from the control node by verify.yml. Each command polls until its condition holds
and fails with what it saw when the deadline passes.

  targets PROM --expect HOST:PORT,...   exactly these targets, every one up
  rule PROM NAME --for SECONDS          alert rule NAME loaded with that `for`
  alert PROM AM NAME --state firing     firing in Prometheus and active in Alertmanager
  alert PROM AM NAME --state inactive   neither pending nor firing, not in Alertmanager
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def poll(deadline_s: float, check: Callable[[], tuple[bool, str]]) -> tuple[bool, str, float]:
    """Runs check every second until it holds or deadline_s passed: (held, last seen, elapsed)."""
    start = time.monotonic()
    seen = ""
    while True:
        try:
            ok, seen = check()
        except OSError as exc:  # not listening yet, or a scrape of a restarting service
            ok, seen = False, f"{type(exc).__name__}: {exc}"
        elapsed = time.monotonic() - start
        if ok or elapsed > deadline_s:
            return ok, seen, elapsed
        time.sleep(1)


def targets(prom: str, expect: set[str]) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        active = get(f"{prom}/api/v1/targets?state=active")["data"]["activeTargets"]
        health = {t["labels"]["instance"]: (t["labels"]["job"], t["health"], t["lastError"])
                  for t in active}
        down = {i: h for i, h in health.items() if h[1] != "up"}
        ok = set(health) == expect and not down
        missing, unexpected = sorted(expect - set(health)), sorted(set(health) - expect)
        return ok, f"missing {missing}, unexpected {unexpected}, down {down}, of {len(health)}"
    return check


def rule(prom: str, name: str, for_s: float) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        groups = get(f"{prom}/api/v1/rules?type=alert")["data"]["groups"]
        found = [r for g in groups for r in g["rules"] if r["name"] == name]
        return (len(found) == 1 and found[0]["duration"] == for_s,
                f"rules named {name}: {[(r['name'], r['duration']) for r in found]}")
    return check


def alert(prom: str, am: str, name: str, state: str) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        in_prom = [a for a in get(f"{prom}/api/v1/alerts")["data"]["alerts"]
                   if a["labels"]["alertname"] == name]
        query = urllib.parse.urlencode({"filter": f'alertname="{name}"'})
        in_am = [a for a in get(f"{am}/api/v2/alerts?{query}")
                 if a["status"]["state"] == "active"]
        seen = (f"Prometheus: {[(a['labels'].get('instance'), a['state']) for a in in_prom]}, "
                f"Alertmanager: {[a['labels'].get('instance') for a in in_am]}")
        if state == "firing":
            return any(a["state"] == "firing" for a in in_prom) and bool(in_am), seen
        return not in_prom and not in_am, seen
    return check


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--within", type=float, default=120, help="deadline in seconds")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("targets")
    p.add_argument("prom")
    p.add_argument("--expect", required=True, help="comma-separated host:port list")
    p = sub.add_parser("rule")
    p.add_argument("prom")
    p.add_argument("name")
    p.add_argument("--for", dest="for_s", type=float, required=True)
    p = sub.add_parser("alert")
    p.add_argument("prom")
    p.add_argument("am")
    p.add_argument("name")
    p.add_argument("--state", choices=["firing", "inactive"], required=True)
    args = parser.parse_args()

    if args.command == "targets":
        check = targets(args.prom, set(args.expect.split(",")))
    elif args.command == "rule":
        check = rule(args.prom, args.name, args.for_s)
    else:
        check = alert(args.prom, args.am, args.name, args.state)
    ok, seen, elapsed = poll(args.within, check)
    print(f"{args.command} {'held' if ok else 'FAILED'} after {elapsed:.1f} s "
          f"(deadline {args.within:.0f} s): {seen}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
