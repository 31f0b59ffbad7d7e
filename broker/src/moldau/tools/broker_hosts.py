"""The hosts of brokers for Moldau's kafka-reassign-partitions: each broker's
`moldau.broker.host` (a Moldau extension), asked of that broker with DescribeConfigs for
that one key, as Kafka's AdminClient asks a broker for its own configs.

Nothing new goes over the wire: a Moldau broker lists the key when its file sets it, and
a Kafka broker answers without it (it knows no such key), so it counts as a host of its
own. The warnings go to stderr: stdout stays what Kafka's tool prints."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence

from moldau.cluster.host_domains import HOST_KEY, shared_hosts
from moldau.protocol.generated.describe_configs_request import DescribeConfigsRequest
from moldau.tools.admin import Admin
from moldau.tools.kafka_errors import check
from moldau.tools.options import ToolError

BROKER = 4  # ConfigResource.Type.BROKER


def broker_hosts(admin: Admin, broker_ids: Iterable[int]) -> dict[int, str]:
    """Broker id -> host for the brokers that have one. A broker that cannot be asked
    counts as a host of its own, with a warning."""
    hosts: dict[int, str] = {}
    for broker_id in sorted(set(broker_ids)):
        try:
            answer = admin.call("DescribeConfigs", 4, broker_id, resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=BROKER, resource_name=str(broker_id),
                    configuration_keys=[HOST_KEY])],
                include_synonyms=False, include_documentation=False)
            result = answer.results[0]
            check(result.error_code, result.error_message)
        except ToolError as exc:  # unreachable, refused, not authorized
            warn(f"could not read {HOST_KEY} of broker {broker_id} ({exc}); it counts as a "
                 "host of its own")
            continue
        for entry in result.configs:
            if entry.name == HOST_KEY and entry.value:
                hosts[broker_id] = entry.value
    return hosts


def warn_shared(label: str, assignment: Mapping[int, Sequence[int]],
                hosts: Mapping[int, str]) -> None:
    """A warning for each partition with more than one replica on one host."""
    for partition, crowded in sorted(shared_hosts(assignment, hosts).items()):
        for host, brokers in crowded.items():
            warn(f"replicas {','.join(map(str, brokers))} of {label}-{partition} are on one "
                 f"host, {host} ({HOST_KEY})")


def warn(text: str) -> None:
    print(f"Warning: {text}", file=sys.stderr, flush=True)
