"""Command line options the way Kafka's tools take them (jopt-simple): `--name value`,
`--name=value`, unambiguous prefixes, repeatable options, and the usage table that
Kafka prints on a missing or conflicting argument."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from moldau.tools import jopt_help
from moldau.tools.jopt_help import java_string


class ToolError(Exception):
    """A failure reported as one line on stderr; the tool exits with status 1."""


class UsageError(ToolError):
    """A command line Kafka answers with a message followed by the usage table."""


@dataclass(frozen=True)
class Opt:
    """One option: a flag when `arg` is None, otherwise it takes a value."""

    name: str
    help: str
    arg: str | None = None
    type: Callable[[str], Any] = str
    default: Any = None
    optional: bool = False  # the value may be left out (jopt-simple's withOptionalArg)
    # the value's kind in the usage table when Kafka's option names it by its converter's
    # pattern ("[PREFERRED,UNCLEAN]") instead of a Java type
    label: str = ""

    @property
    def spec(self) -> str:
        """How jopt-simple names the option in messages: [name]."""
        return f"[{self.name}]"


@dataclass
class Options:
    """The parsed command line: values in order of appearance, per option name."""

    values: dict[str, list[Any]] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)  # non-option arguments
    argv: Sequence[str] = ()

    def has(self, name: str) -> bool:
        return name in self.values

    def get(self, name: str, default: Any = None) -> Any:  # Any: of its option's Opt.type
        if name in self.values:
            return self.values[name][-1]
        return self.defaults.get(name, default)

    def all(self, name: str) -> list[Any]:  # Any: as get()
        return list(self.values.get(name, []))


def _type_label(opt: Opt) -> str:
    """jopt-simple's argument label: the value's type, then its description if any."""
    labels: dict[Callable[[str], Any], str] = {int: "Integer", float: "Double", _long: "Long"}
    kind = opt.label or labels.get(opt.type, "String")
    return f"{kind}: {opt.arg}" if opt.arg else kind


def _long(text: str) -> int:
    return int(text)


LONG = _long


class OptionParser:
    def __init__(self, options: Iterable[Opt]) -> None:
        self.options = {o.name: o for o in options}
        self.options.setdefault("help", Opt("help", "Print usage information."))
        self.options.setdefault("version", Opt("version", "Display Kafka version."))

    def _lookup(self, name: str) -> Opt:
        if name in self.options:
            return self.options[name]
        matches = [o for n, o in self.options.items() if n.startswith(name)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise ToolError(f"{name} is ambiguous; possibilities: "
                            + ", ".join(repr(m.name) for m in matches))
        raise ToolError(f"{name} is not a recognized option")

    def parse(self, argv: Sequence[str]) -> Options:
        parsed = Options(defaults={n: o.default for n, o in self.options.items()
                                   if o.default is not None}, argv=list(argv))
        i = 0
        while i < len(argv):
            token = argv[i]
            i += 1
            if token == "--":
                parsed.args.extend(argv[i:])
                break
            if not token.startswith("-") or token == "-":
                parsed.args.append(token)
                continue
            name, eq, inline = token.lstrip("-").partition("=")
            opt = self._lookup(name)
            if opt.arg is None:
                if eq:
                    raise ToolError(f"Option {opt.spec} does not take an argument")
                parsed.values.setdefault(opt.name, []).append(True)
                continue
            if eq:
                raw = inline
            elif opt.optional and (i >= len(argv) or argv[i].startswith("--")):
                parsed.values.setdefault(opt.name, []).append("")
                continue
            elif i < len(argv):
                raw = argv[i]
                i += 1
            else:
                raise ToolError(f"Option {opt.spec} requires an argument")
            try:
                value = opt.type(raw)
            except ValueError:
                raise ToolError(f"Cannot parse argument '{raw}' of option {opt.name}") from None
            parsed.values.setdefault(opt.name, []).append(value)
        return parsed

    def usage(self) -> str:
        """The option table jopt-simple prints (jopt_help), without its last newline."""
        rows = []
        for opt in sorted(self.options.values(), key=lambda o: o.name):
            left = f"--{opt.name}"
            if opt.arg is not None:
                label = _type_label(opt)
                left += f" [{label}]" if opt.optional else f" <{label}>"
            help_text = opt.help
            if opt.default is not None:
                help_text = f"{help_text} (default: {java_string(opt.default)})".strip()
            rows.append((left, help_text))
        return jopt_help.table(rows).removesuffix("\n")


def require(options: Options, *names: str) -> None:
    """Kafka's CommandLineUtils.checkRequiredArgs."""
    for name in names:
        if not options.has(name):
            raise UsageError(f'Missing required argument "[{name}]"')


def forbid(options: Options, used: str, *invalid: str) -> None:
    """Kafka's CommandLineUtils.checkInvalidArgs."""
    if options.has(used):
        for name in invalid:
            if options.has(name):
                raise UsageError(f'Option "[{used}]" can\'t be used with option "[{name}]"')


def exactly_one(options: Options, names: Sequence[str], message: str) -> str:
    """The one action given; a UsageError with Kafka's message otherwise."""
    given = [n for n in names if options.has(n)]
    if len(given) != 1:
        raise UsageError(message)
    return given[0]
