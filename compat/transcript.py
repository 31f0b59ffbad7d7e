"""A transcript: what one side of a scenario showed, one observation a line.

Commands go in as Kafka's tools print them: a `$ tool args` line, the standard output,
the standard error as `! ` lines, then `exit N`, so a difference in any of them shows
where it happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from compat.launcher import ToolRun


@dataclass
class Transcript:
    lines: list[str] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)
    # Set by scenarios whose result is not a list of exit codes ("25 records").
    note: str = ""

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def command(self, label: str, args: Sequence[str], run: ToolRun,
                stderr: bool = True) -> None:
        """Add a command's run; `stderr=False` leaves out its standard error (a client's
        log, whose warnings depend on timing, not on the broker's answers)."""
        self.lines.append("$ " + " ".join([label, *args]))
        self.lines.extend(run.stdout.splitlines())
        if stderr:
            self.lines.extend("! " + line for line in run.stderr.splitlines())
        self.lines.append(f"exit {run.exit_code}")
        self.exit_codes.append(run.exit_code)

    @property
    def summary(self) -> str:
        """The result column of the report: exit codes in order, or the scenario's note."""
        if self.note:
            return self.note
        return "exits " + " ".join(str(code) for code in self.exit_codes)
