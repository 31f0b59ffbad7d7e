"""The tools by name (`moldau <name>`), imported only when run."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

# name -> the module holding its TOOL
TOOLS = {
    "topics": "moldau.tools.topics",
    "configs": "moldau.tools.configs",
    "consumer-groups": "moldau.tools.consumer_groups",
}


def run_tool(name: str, argv: Sequence[str]) -> int:
    return importlib.import_module(TOOLS[name]).TOOL.main(list(argv))
