"""The JVM system properties in a KAFKA_OPTS string: how a Kafka operator names the JAAS
file (`-Djava.security.auth.login.config=...`) and the other `-D` switches Kafka reads."""

from __future__ import annotations

import re
import shlex
from urllib.parse import unquote, urlparse

from moldau.security.sasl.jaas_entry import JaasError

JAVA_LOGIN_CONFIG_PARAM = "java.security.auth.login.config"

_SYSTEM_PROPERTY = re.compile(r"-D([^=]+)(?:=(.*))?", re.DOTALL)


def system_properties_from_kafka_opts(kafka_opts: str) -> dict[str, str]:
    """Every `-Dkey=value` of a KAFKA_OPTS string, split as the shell would (a later
    one wins, `-Dkey` alone is the empty string, as in Java)."""
    try:
        words = shlex.split(kafka_opts)
    except ValueError as exc:
        raise JaasError(f"Cannot split KAFKA_OPTS as the shell would: {exc}") from None
    properties: dict[str, str] = {}
    for word in words:
        match = _SYSTEM_PROPERTY.fullmatch(word)
        if match is not None:
            properties[match[1]] = match[2] or ""
    return properties


def jaas_file_from_kafka_opts(kafka_opts: str) -> str | None:
    """The file `-Djava.security.auth.login.config=<path>` names, None without one.
    `==path` (use only this file) and `file:` URLs name a path too."""
    value = system_properties_from_kafka_opts(kafka_opts).get(JAVA_LOGIN_CONFIG_PARAM)
    if not value:
        return None
    if value.startswith("="):
        value = value[1:]
    if value.startswith("file:"):
        value = unquote(urlparse(value).path)
    return value
