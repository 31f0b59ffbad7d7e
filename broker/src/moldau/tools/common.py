"""What several tools share: the bootstrap and property-file options, the admin client
built from them, the client properties translated for librdkafka."""

from __future__ import annotations

from collections.abc import Mapping

from moldau.client.security import ClientConfigError, librdkafka_settings
from moldau.tools.admin import Admin
from moldau.tools.options import Opt, Options, ToolError
from moldau.tools.properties import load_properties


def bootstrap_opts(client: str,
                   bootstrap_help: str = "REQUIRED: The Kafka server to connect to.",
                   bootstrap_arg: str = "server to connect to",
                   config_arg: str = "command config property file",
                   config_help: str = "Property file containing configs to be passed to",
                   ) -> list[Opt]:
    """--bootstrap-server and --command-config, worded as the tool's Kafka counterpart
    words them (each of Kafka's tools has its own)."""
    return [
        Opt("bootstrap-server", bootstrap_help, bootstrap_arg),
        Opt("command-config", f"{config_help} {client}.", config_arg),
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
