"""How every tool runs: usage with no arguments, Kafka's messages for bad command lines,
one line on stderr and exit status 1 for failures."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from moldau.tools.options import Opt, OptionParser, Options, ToolError, UsageError

KAFKA_VERSION = "3.9.0"


class ArgumentError(ToolError):
    """Kafka's IllegalArgumentException path: the message alone, without the tool's
    "Error while executing ..." prefix."""


@dataclass
class Tool:
    name: str  # as in `moldau <name>`, e.g. "topics"
    purpose: str  # the line printed above the usage table
    options: list[Opt]
    run: Callable[[Options], int]
    # put before failures; "{args}" stands for the command line
    error_prefix: str = ""  # e.g. "Error while executing topic command : "
    plain_parse_errors: bool = False  # option errors without the prefix (Scala tools)

    def parser(self) -> OptionParser:
        return OptionParser(self.options)

    def main(self, argv: Sequence[str] | None = None) -> int:
        argv = list(sys.argv[1:] if argv is None else argv)
        parser = self.parser()
        try:
            if not argv:
                raise UsageError(self.purpose)
            try:
                options = parser.parse(argv)
            except UsageError:
                raise
            except ToolError as exc:
                if self.plain_parse_errors:
                    raise ArgumentError(str(exc)) from None
                raise
            if options.has("help"):
                raise UsageError(self.purpose)
            if options.has("version"):
                print(KAFKA_VERSION)
                return 0
            return self.run(options)
        except UsageError as exc:
            print(exc, file=sys.stderr)
            print(parser.usage(), file=sys.stderr)
            return 1
        except ArgumentError as exc:
            print(exc, file=sys.stderr)
            return 1
        except ToolError as exc:
            prefix = self.error_prefix.replace("{args}", " ".join(argv))
            print(f"{prefix}{exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            return 1
