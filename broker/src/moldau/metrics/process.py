"""The broker process's own figures (Linux /proc), as one MBean `moldau:type=Process`
whose attributes the exporters turn into the Prometheus client's standard `process_*`
names (what the JMX exporter's agent serves for a Kafka JVM)."""

from __future__ import annotations

import os
import resource

from .registry import Attributes

PROCESS_BEAN = "moldau:type=Process"
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _boot_time() -> float:
    with open("/proc/stat") as fh:
        for line in fh:
            if line.startswith("btime "):
                return float(line.split()[1])
    return 0.0


def process_bean() -> dict[str, Attributes]:
    with open("/proc/self/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    utime, stime, start_ticks = int(fields[11]), int(fields[12]), int(fields[19])
    vsize, rss_pages = int(fields[20]), int(fields[21])
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {PROCESS_BEAN: {
        "OpenFileDescriptors": len(os.listdir("/proc/self/fd")),
        "MaxFileDescriptors": soft,
        "CpuSeconds": (utime + stime) / _TICKS,
        "ResidentMemoryBytes": rss_pages * _PAGE,
        "VirtualMemoryBytes": vsize,
        "StartTimeSeconds": _boot_time() + start_ticks / _TICKS,
    }}
