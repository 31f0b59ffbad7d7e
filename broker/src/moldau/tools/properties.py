"""Java .properties files (--command-config, --producer.config, --add-config-file ...)."""

from __future__ import annotations

from pathlib import Path

from moldau.tools.options import ToolError


def parse_properties(text: str) -> dict[str, str]:
    """key=value / key: value / key value lines; # and ! comments; trailing-backslash
    continuation lines (the subset of java.util.Properties that config files use)."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        cut = min((i for i in (line.find("="), line.find(":"), line.find(" ")) if i >= 0),
                  default=len(line))
        key = line[:cut].strip()
        value = line[cut + 1:].strip() if cut < len(line) else ""
        if value[:1] in "=:" and line[cut] == " ":
            value = value[1:].strip()
        props[key] = value
    return props


def load_properties(path: str) -> dict[str, str]:
    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ToolError(f"{path} ({exc.strerror})") from None
