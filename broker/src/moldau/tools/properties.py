"""Java .properties files (--command-config, --producer.config, --add-config-file ...)."""

from __future__ import annotations

from moldau import properties
from moldau.tools.options import ToolError


def load_properties(path: str) -> dict[str, str]:
    """The file as Kafka's tools read it (Utils.loadProps: Properties.load(InputStream), so
    ISO-8859-1 and Java's rules); an unreadable or malformed file is a ToolError."""
    try:
        return properties.load(path)
    except OSError as exc:
        raise ToolError(f"{path} ({exc.strerror})") from None
    except properties.PropertiesError as exc:
        raise ToolError(f"{path}: {exc}") from None
