"""The broker process's own figures, from psutil, as one MBean `moldau:type=Process`
whose attributes the exporters turn into the Prometheus client's standard `process_*`
names (what the JMX exporter's agent serves for a Kafka JVM)."""

from __future__ import annotations

import resource

import psutil

from .registry import Attributes

PROCESS_BEAN = "moldau:type=Process"


def process_bean() -> dict[str, Attributes]:
    process = psutil.Process()
    with process.oneshot():  # one read of /proc/self/stat for every figure
        cpu = process.cpu_times()
        memory = process.memory_info()
        descriptors = process.num_fds()
        started = process.create_time()
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {PROCESS_BEAN: {
        "OpenFileDescriptors": descriptors,
        "MaxFileDescriptors": soft,
        "CpuSeconds": cpu.user + cpu.system,
        "ResidentMemoryBytes": memory.rss,
        "VirtualMemoryBytes": memory.vms,
        "StartTimeSeconds": started,
    }}
