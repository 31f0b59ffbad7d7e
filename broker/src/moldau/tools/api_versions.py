"""kafka-broker-api-versions: each broker's ApiVersions answer in Kafka's NodeApiVersions
format, with the version this client would use."""

from __future__ import annotations

from moldau.protocol.generated.api import APIS
from moldau.tools.common import admin_from, bootstrap_opts
from moldau.tools.kafka_errors import check
from moldau.tools.options import Options, require
from moldau.tools.runner import Tool

OPTIONS = bootstrap_opts("Admin Client")
BROKER_LISTENERS = {"zkBroker", "broker"}


def describe_versions(offered: dict[int, tuple[int, int]]) -> list[str]:
    """One line per API this client knows for brokers, then the ones it does not know."""
    lines = []
    for key, spec in sorted(APIS.items()):
        if not BROKER_LISTENERS & set(spec.listeners):
            continue
        if key not in offered:
            lines.append(f"{spec.name}({key}): UNSUPPORTED")
            continue
        low, high = offered[key]
        usable = min(high, spec.max_version)
        usable_text = (f"[usable: {usable}]" if usable >= max(low, spec.min_version)
                       else "[unusable: node too new]")
        lines.append(f"{spec.name}({key}): {low} to {high} {usable_text}")
    for key in sorted(set(offered) - set(APIS)):
        low, high = offered[key]
        lines.append(f"UNKNOWN({key}): {low} to {high}")
    return lines


def run(options: Options) -> int:
    require(options, "bootstrap-server")
    with admin_from(options) as admin:
        brokers = admin.metadata([]).brokers
        for broker in sorted(brokers, key=lambda b: b.node_id):
            answer = admin.call("ApiVersions", 3, broker.node_id,
                                client_software_name="moldau-tools",
                                client_software_version="0.1.0")
            check(answer.error_code)
            offered = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
            rack = broker.rack if broker.rack is not None else "null"
            print(f"{broker.host}:{broker.port} (id: {broker.node_id} rack: {rack}) -> (")
            print(",\n".join("\t" + line for line in describe_versions(offered)))
            print(")")
    return 0


TOOL = Tool("broker-api-versions", "This tool helps to retrieve broker version information.",
            OPTIONS, run)
