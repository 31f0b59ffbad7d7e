"""What several tools share: the bootstrap and property-file options, the admin client
built from them, the client properties translated for librdkafka."""

from __future__ import annotations

from collections.abc import Mapping

from moldau.client.security import ClientConfigError, librdkafka_settings
from moldau.tools.admin import Admin
from moldau.tools.options import Opt, Options, ToolError
from moldau.tools.properties import load_properties


def bootstrap_opts(client: str) -> list[Opt]:
    return [
        Opt("bootstrap-server", "REQUIRED: The Kafka server to connect to.",
            "server to connect to"),
        Opt("command-config", f"Property file containing configs to be passed to {client}.",
            "command config property file"),
    ]


def client_config(options: Options, *files: str) -> dict[str, str]:
    """The properties of the first property-file option given (--command-config, ...)."""
    for name in files or ("command-config",):
        if options.get(name):
            return load_properties(options.get(name))
    return {}


def admin_from(options: Options, bootstrap_flag: str = "bootstrap-server") -> Admin:
    config = client_config(options)
    servers = options.get(bootstrap_flag) or config.get("bootstrap.servers", "")
    return Admin(servers, config)


def librdkafka_config(config: Mapping[str, str]) -> dict[str, str]:
    """A Kafka client config (security included: TLS stores, SASL logins) as librdkafka
    (confluent-kafka) settings, for the tools built on it."""
    try:
        return librdkafka_settings(config)
    except ClientConfigError as exc:
        raise ToolError(str(exc)) from None
