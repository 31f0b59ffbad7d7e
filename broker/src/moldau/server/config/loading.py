"""Reading `server.properties` text and files (Java's syntax, moldau.properties)."""

from __future__ import annotations

from moldau import properties

from .errors import ConfigError


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties text (moldau.properties); a malformed \\uxxxx escape is a
    ConfigError naming its key, as every other bad setting is."""
    try:
        return properties.parse(text)
    except properties.PropertiesError as exc:
        raise _config_error(exc) from None


def load_properties(path: str) -> dict[str, str]:
    """A server.properties file, read as Kafka reads it (ISO-8859-1, Java's rules)."""
    try:
        return properties.load(path)
    except properties.PropertiesError as exc:
        raise _config_error(exc) from None


def _config_error(exc: properties.PropertiesError) -> ConfigError:
    return ConfigError(exc.key, exc.value, str(exc))
