"""How every tool runs: usage with no arguments, Kafka's messages for bad command lines,
one line on stderr and exit status 1 for failures, or, for a tool that names a logger,
Kafka's TopicCommand way: the failure on stdout and its exception logged on stderr."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from moldau.tools.kafka_errors import KafkaToolError
from moldau.tools.options import Opt, OptionParser, Options, ToolError, UsageError

KAFKA_VERSION = "3.9.0"
ILLEGAL_ARGUMENT = "java.lang.IllegalArgumentException"
# what a failure without a Kafka error code is logged as
KAFKA_EXCEPTION = "org.apache.kafka.common.KafkaException"


class ArgumentError(ToolError):
    """Kafka's IllegalArgumentException path: the message alone, without the tool's
    "Error while executing ..." prefix."""


def java_exception(error: ToolError) -> str:
    """The Java exception Kafka's tool would have failed with."""
    if isinstance(error, KafkaToolError):
        return error.exception_class
    if isinstance(error, ArgumentError):
        return ILLEGAL_ARGUMENT
    return KAFKA_EXCEPTION


def log4j_error(message: str, logger: str) -> str:
    """An ERROR line in the layout of Kafka's tools-log4j.properties, "[%d] %p %m (%c)%n"
    (local time, milliseconds after a comma)."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    return f"[{stamp},{int(now * 1000) % 1000:03d}] ERROR {message} ({logger})"


@dataclass
class Tool:
    name: str  # as in `moldau <name>`, e.g. "topics"
    purpose: str  # the line printed above the usage table
    options: list[Opt]
    run: Callable[[Options], int]
    # put before failures; "{args}" stands for the command line
    error_prefix: str = ""  # e.g. "Error while executing topic command : "
    plain_parse_errors: bool = False  # option errors without the prefix (Scala tools)
    # the checks of the command line (Kafka's XCommandOptions), before `run`
    check: Callable[[Options], object] | None = None
    # Kafka's TopicCommand.printException: a failure once the command line is checked
    # goes to stdout after the prefix, and its exception is logged at ERROR on stderr
    # under this logger; "" keeps every failure on stderr
    error_logger: str = ""
    # Scala ConfigCommand's way for a broker's error: this header ("{args}": the command
    # line), then the AdminClient's ExecutionException and its cause, on stderr
    broker_error_header: str = ""

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
            if self.check is not None:
                self.check(options)
            try:
                return self.run(options)
            except KafkaToolError as exc:
                if self.broker_error_header:
                    header = self.broker_error_header.replace("{args}", " ".join(argv))
                    cause = f"{exc.exception_class}: {exc}"
                    print(f"{header}\njava.util.concurrent.ExecutionException: {cause}\n"
                          f"Caused by: {cause}", file=sys.stderr)
                    return 1
                if not self.error_logger:
                    raise
                self._print_logged(exc, self._prefix(argv))
                return 1
            except ToolError as exc:
                if not self.error_logger:
                    raise
                self._print_logged(exc, self._prefix(argv))
                return 1
        except UsageError as exc:
            print(exc, file=sys.stderr)
            print(parser.usage(), file=sys.stderr)
            return 1
        except ArgumentError as exc:
            print(exc, file=sys.stderr)
            return 1
        except ToolError as exc:
            print(f"{self._prefix(argv)}{exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            return 1

    def _prefix(self, argv: list[str]) -> str:
        return self.error_prefix.replace("{args}", " ".join(argv))

    def _print_logged(self, error: ToolError, prefix: str) -> None:
        """Stdout gets the prefixed message; stderr the exception as Kafka's log shows it
        (without the Java stack frames, which Moldau has none of)."""
        print(f"{prefix}{error}", flush=True)
        print(log4j_error(f"{java_exception(error)}: {error}\n", self.error_logger),
              file=sys.stderr)
