"""Several of Kafka's tools in one JVM (compat/java/ToolBatch.java): each command gets
its own standard output, standard error and exit status, as if it ran alone, but the JVM
starts once. A scenario of sixteen TopicCommand runs takes seconds instead of a minute.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from compat import javac, launcher
from compat.launcher import ToolRun

BATCH_MAIN = "ToolBatch"


class BatchError(RuntimeError):
    """The batch JVM stopped before every command had run (a tool called System.exit)."""


def run_batch(commands: Sequence[tuple[str, Sequence[str]]],
              timeout: float = 300.0, jvm_options: Sequence[str] = ()) -> list[ToolRun]:
    """Run (main class, arguments) commands in order; one ToolRun each (`jvm_options`:
    the JVM's own, a Kerberos configuration say)."""
    for main_class, args in commands:
        if any("\t" in word or "\n" in word for word in (main_class, *args)):
            raise ValueError(f"a tab or newline in {main_class} {args}: the batch splits on them")
    lines = "".join("\t".join([main_class, *args]) + "\n" for main_class, args in commands)
    with tempfile.TemporaryDirectory(prefix="tool-batch-") as scratch:
        out = Path(scratch)
        run = launcher.run_tool(BATCH_MAIN, [str(out)], stdin=lines, timeout=timeout,
                                extra_classpath=[str(javac.classes_dir())],
                                jvm_options=jvm_options)
        results = []
        for i in range(len(commands)):
            exit_file = out / f"{i}.exit"
            if not exit_file.exists():
                raise BatchError(f"the tool batch stopped at command {i} ({commands[i][0]}) "
                                 f"with exit code {run.exit_code}:\n{run.stdout}\n{run.stderr}")
            results.append(ToolRun(int(exit_file.read_text()),
                                   (out / f"{i}.out").read_text(errors="replace"),
                                   (out / f"{i}.err").read_text(errors="replace")))
    return results
