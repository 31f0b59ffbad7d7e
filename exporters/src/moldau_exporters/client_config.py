"""The lag exporter's client settings: librdkafka properties from a file of KEY=VALUE lines
(as Kafka's tools take a `--command-config` file) and from the command line, checked by
librdkafka before the exporter serves anything.

A password belongs in the file (0600, the exporter's user's): a command line is visible
to every local user in `ps` and to anyone who reads the systemd unit, so the secret keys
are refused there. The file's format is the plain subset of a Java properties file that
client settings need: blank lines and lines starting with `#` or `!` are skipped, every
other line is `KEY=VALUE` (spaces around the key and before the value are dropped, the
rest of the value is taken as it is). Errors name the file and the line, never a value.
"""

from __future__ import annotations

# librdkafka properties, as AdminClient takes them
ClientConfig = dict[str, str | int | float | bool]

# keys whose values are secrets: only in the file, never on the command line
SECRET_KEYS = frozenset({
    "sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.key.pem",
    "sasl.oauthbearer.client.secret",
})
# Java client properties librdkafka does not have, and what to write instead
JAVA_ONLY_KEYS = {
    "sasl.jaas.config": "sasl.username and sasl.password (PLAIN, SCRAM)",
    "ssl.truststore.location": "ssl.ca.location (a PEM CA bundle)",
    "ssl.truststore.password": "nothing (ssl.ca.location is a PEM file)",
    "ssl.truststore.type": "nothing (ssl.ca.location is a PEM file)",
    "ssl.keystore.location": "ssl.certificate.location and ssl.key.location (PEM files)",
    "ssl.keystore.type": "nothing (the PEM files of ssl.certificate.location and ssl.key.location)",
}


class ClientConfigError(ValueError):
    """A client setting the exporter cannot use; the message says which and why."""


def parse_properties(text: str, source: str) -> dict[str, str]:
    """The KEY=VALUE lines of `text` (from `source`, named in errors)."""
    found: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key or any(c.isspace() for c in key):
            # the line itself is not shown: it may hold a password
            raise ClientConfigError(f"{source} line {number}: expected KEY=VALUE")
        if line.rstrip().endswith("\\"):
            raise ClientConfigError(
                f"{source} line {number} ({key}): ends with a backslash; continuation "
                "lines and escapes are not read, write the value on one line")
        if key in found:
            raise ClientConfigError(
                f"{source} line {number}: {key} given again (first on line {first_line[key]})")
        found[key] = value.lstrip()
        first_line[key] = number
    return found


def read_properties(path: str) -> dict[str, str]:
    """The KEY=VALUE lines of the file at `path`."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ClientConfigError(f"cannot read the client config {path}: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise ClientConfigError(f"the client config {path} is not UTF-8 text ({e.reason} at "
                                f"byte {e.start})") from e
    return parse_properties(text, path)


def command_line_properties(items: list[str]) -> dict[str, str]:
    """`--client-property KEY=VALUE` items; a secret is refused (it would be in `ps`)."""
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            # only the part before any '=' is shown: the value may be a secret
            raise ClientConfigError(f"--client-property {key!r}...: expected KEY=VALUE")
        if key in SECRET_KEYS:
            raise ClientConfigError(
                f"--client-property {key}: a secret on the command line is visible in ps "
                "and in the service's unit; put it in the --client-config file (mode 0600)")
        found[key] = value
    return found


def client_config(bootstrap: str, config_file: str | None,
                  properties: list[str]) -> ClientConfig:
    """bootstrap.servers, then the file's settings, then the command line's (which win,
    as a Kafka tool's --producer-property wins over its --producer.config), checked."""
    config: ClientConfig = {"bootstrap.servers": bootstrap}
    if config_file is not None:
        config.update(read_properties(config_file))
    config.update(command_line_properties(properties))
    check(config)
    return config


def check(config: ClientConfig) -> None:
    """Refuses settings librdkafka would refuse at the first scrape (an unknown key, a
    mechanism this build lacks, an unreadable CA file), which would otherwise only show
    as a cluster that is down."""
    for key, instead in JAVA_ONLY_KEYS.items():
        if key in config:
            raise ClientConfigError(f"{key} is a Java client property librdkafka does not "
                                    f"read; write {instead}")
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    # without bootstrap.servers the client opens no connection; log_level 0 keeps it quiet
    probe = {k: v for k, v in config.items() if k != "bootstrap.servers"}
    try:
        AdminClient({**probe, "log_level": 0})
    except KafkaException as e:
        raise ClientConfigError(f"librdkafka refuses the client settings: {e.args[0].str()}") from e
