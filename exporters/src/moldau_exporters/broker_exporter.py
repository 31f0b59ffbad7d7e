"""Exports a Moldau broker's metrics to Prometheus under the names the Prometheus JMX
exporter gives Kafka's MBeans.

It reads the broker's JMX-like endpoint (`MOLDAU_METRICS_PORT`, docs/metrics.md) on each
scrape, applies rules in the JMX exporter's YAML format (the packaged rules/kafka.yml by
default) and serves them on /metrics through prometheus-client (exposition.py):

    moldau-broker-exporter --broker-metrics http://127.0.0.1:9999 --listen 127.0.0.1:9404

Like the JMX exporter, it always answers: `jmx_scrape_error` is 1 when the broker could
not be read, and `jmx_scrape_duration_seconds` says how long the read took.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from importlib.resources import files
from pathlib import Path

from .exposition import exposition, run
from .jmx_rules import RuleError, RuleSet, Sample

DEFAULT_RULES = "kafka.yml"
PROCESS_BEAN = "moldau:type=Process"
# the broker process's figures -> the Prometheus client's standard process metrics
PROCESS_SAMPLES = {
    "OpenFileDescriptors": ("process_open_fds", "GAUGE", "Number of open file descriptors"),
    "MaxFileDescriptors": ("process_max_fds", "GAUGE", "Maximum number of open file descriptors"),
    "CpuSeconds": ("process_cpu_seconds_total", "COUNTER", "User and system CPU time in seconds"),
    "ResidentMemoryBytes": ("process_resident_memory_bytes", "GAUGE", "Resident memory size"),
    "VirtualMemoryBytes": ("process_virtual_memory_bytes", "GAUGE", "Virtual memory size"),
    "StartTimeSeconds": ("process_start_time_seconds", "GAUGE",
                         "Start time of the process since the epoch in seconds"),
}


def default_rules() -> RuleSet:
    return RuleSet.from_yaml(files("moldau_exporters").joinpath("rules", DEFAULT_RULES)
                             .read_text(encoding="utf-8"))


def collect(broker_metrics: str, rules: RuleSet, timeout: float = 10.0) -> list[Sample]:
    """One scrape: the broker's MBeans through the rules, plus the scrape's own gauges."""
    started = time.monotonic()
    samples: list[Sample] = []
    error = 0.0
    try:
        with urllib.request.urlopen(broker_metrics.rstrip("/") + "/jmx", timeout=timeout) as r:
            beans = json.load(r)["beans"]
        for bean in beans:
            attributes = {k: v for k, v in bean.items() if k != "name"}
            if bean["name"] == PROCESS_BEAN:
                samples.extend(Sample(name, (), float(attributes[key]), kind, help_)
                               for key, (name, kind, help_) in PROCESS_SAMPLES.items()
                               if key in attributes)
            else:
                samples.extend(rules.apply(bean["name"], attributes))
    except (OSError, ValueError, KeyError, TypeError):
        error = 1.0
    samples.append(Sample("jmx_scrape_duration_seconds", (), time.monotonic() - started,
                          "GAUGE", "Time this scrape of the broker's MBeans took"))
    samples.append(Sample("jmx_scrape_error", (), error, "GAUGE",
                          "1 if the broker's MBeans could not be read, else 0"))
    return samples


def scrape(broker_metrics: str, rules: RuleSet, timeout: float = 10.0) -> str:
    """One scrape in the Prometheus text format (what /metrics answers)."""
    return exposition(collect(broker_metrics, rules, timeout))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="moldau-broker-exporter", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker-metrics", default="http://127.0.0.1:9999",
                        help="the broker's metrics endpoint (MOLDAU_METRICS_PORT)")
    parser.add_argument("--listen", default="127.0.0.1:9404", help="host:port to serve on")
    parser.add_argument("--rules", type=Path, help="a rule file (default: the packaged one)")
    args = parser.parse_args(argv)
    try:
        rules = (RuleSet.from_yaml(args.rules.read_text(encoding="utf-8")) if args.rules
                 else default_rules())
    except (OSError, RuleError) as exc:
        print(f"moldau-broker-exporter: {exc}", file=sys.stderr)
        return 2
    return run(lambda: collect(args.broker_metrics, rules), args.listen)


if __name__ == "__main__":
    sys.exit(main())
