"""The usage and error lines of Kafka's argparse4j tools (argparse4j 0.7.0, as Kafka 3.9.1
ships it: ProducerPerformance, TransactionsCommand), for Moldau's tools that read their
command line with Python's argparse.

argparse4j lays a usage out as `usage: PROG` followed by one short form per argument
(`[-h]`, `--topic TOPIC`, `[--opt METAVAR]`, a required group as `(--a A`, `|`, `--b B)`),
each put on the current line while it fits in 75 columns, else on a new line indented
under the first. Its error line, `PROG: error: MESSAGE`, is cut where Java's line
BreakIterator allows and every line but the last is justified to the full width by
widening its runs of spaces.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from moldau.tools.java_line_breaks import segments

# argparse4j's width when the terminal's is unknown (the lab's and any script's case)
FORMAT_WIDTH = 75
# a `usage: PROG` longer than this puts the arguments on the next lines, 6 columns in
_PROG_INDENT_LIMIT = 30
_NEW_LINE_INDENT = 6


def usage(prog: str, items: Sequence[str], width: int = FORMAT_WIDTH) -> str:
    """`usage: PROG ITEM ...`, wrapped as argparse4j wraps it; ends with a newline."""
    head = f"usage: {prog}"
    if len(head) > _PROG_INDENT_LIMIT:
        out, indent = head + "\n" + " " * _NEW_LINE_INDENT, " " * _NEW_LINE_INDENT
    else:
        out, indent = head, " " * len(head)
    current = len(out) - out.rfind("\n") - 1
    first = True
    for item in items:
        if not first and current + len(item) + 1 > width:
            out += f"\n{indent} {item}"
            current = len(indent) + 1 + len(item)
        else:
            out += f" {item}"
            current += 1 + len(item)
            first = False
    return out + "\n"


def error(prog: str, message: str, width: int = FORMAT_WIDTH) -> str:
    """argparse4j's `PROG: error: MESSAGE` line, wrapped and justified; ends with a
    newline."""
    return wrap(f"{prog}: error: {message}\n", width)


def wrap(text: str, width: int, initial_offset: int = 0, initial_indent: str = "",
         subsequent_indent: str = "") -> str:
    """argparse4j's TextHelper.wrap: fill lines with line-break segments; a line that
    overflows is ended before the segment and justified."""
    out = initial_indent
    line = ""
    current = initial_offset + len(initial_indent)
    for segment in segments(text):
        current += len(segment)
        if current > width:
            out += _justified(line, width, current - len(segment)) + "\n" + subsequent_indent
            line = ""
            current = len(subsequent_indent) + len(segment)
        line += segment
        if segment.endswith("\n"):
            out += line + subsequent_indent
            line = ""
            current = len(subsequent_indent)
    return out + line


def _justified(line: str, width: int, current: int) -> str:
    """The line without its outer spaces, its runs of spaces widened to fill `width`;
    the odd spaces go to the middle runs."""
    stripped = line.strip(" ")
    current -= len(line) - len(stripped)
    runs = re.split(r"( +)", stripped)  # words at even indexes, runs of spaces at odd
    blocks = len(runs) // 2
    needed = width - current
    if blocks == 0 or needed <= 0:
        return stripped
    each, extra = divmod(needed, blocks)
    extra_start = (blocks - extra + 1) // 2
    for block in range(blocks):
        wider = each + (1 if extra_start <= block < extra_start + extra else 0)
        runs[2 * block + 1] += " " * wider
    return "".join(runs)


# --- Python argparse read as argparse4j ---------------------------------------------------

_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")


def java_number(kind: str, bits: int) -> Callable[[str], int]:
    """A converter for Java's Integer/Long/Short arguments, failing with argparse4j's
    text ("could not convert 'x' to Long (For input string: "x")")."""
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def convert(text: str) -> int:
        if not _JAVA_INTEGER.fullmatch(text):  # no spaces or underscores, unlike int()
            raise argparse.ArgumentTypeError(
                f"could not convert '{text}' to {kind} (For input string: \"{text}\")")
        value = int(text)
        if not low <= value <= high:
            detail = (f'Value out of range. Value:"{text}" Radix:10' if kind == "Short"
                      else f'For input string: "{text}"')
            raise argparse.ArgumentTypeError(
                f"could not convert '{text}' to {kind} ({detail})")
        return value
    convert.__name__ = kind
    return convert


_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)")


def java_double(text: str) -> float:
    """Double.valueOf's accepted forms, failing with argparse4j's text."""
    if not _JAVA_DOUBLE.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(
            f"could not convert '{text}' to Double (For input string: \"{text}\")")
    return float(text.strip().rstrip("fFdD"))


INTEGER, LONG, SHORT = java_number("Integer", 32), java_number("Long", 64), \
    java_number("Short", 16)


def argparse4j_message(message: str) -> str:
    """argparse4j's wording of Python argparse's messages."""
    required = "the following arguments are required: "
    if message.startswith(required):
        missing = message[len(required):].split(", ")
        # argparse4j finds a missing command first, when the arguments run out; of the
        # missing options it reports the last (each one found replaces the one before)
        if "COMMAND" in missing:
            return "too few arguments"
        return f"argument {missing[-1]} is required"
    choice = re.fullmatch(r"argument \S+: (invalid choice: .*)", message)
    if choice:  # argparse4j names no argument for a bad command
        return choice.group(1)
    unrecognized = "unrecognized arguments: "
    if message.startswith(unrecognized):
        return f"{unrecognized}'{message[len(unrecognized):]}'"
    return message


def _short(action: argparse.Action, bracket: bool) -> str:
    """argparse4j's short form of an argument: its first flag and metavar."""
    flag = action.option_strings[0]
    if action.nargs == 0:
        text = flag
    else:
        metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
        text = f"{flag} {metavar} [{metavar} ...]" if action.nargs == "+" else f"{flag} {metavar}"
    return f"[{text}]" if bracket and not action.required else text


_HELP_COLUMN = 25
_TITLE_ROOM = 21
_GROUP_INDENT = 2


def _help_entry(action: argparse.Action) -> str:
    """One argument in argparse4j's help: its flags and metavar, then its help (and
    default) from column 25, on the same line when the title leaves room."""
    title = ", ".join(action.option_strings)
    if action.nargs != 0:
        title += " " + _short(action, False).split(" ", 1)[1]
    text = str(action.help or "")
    if (action.default not in (None, argparse.SUPPRESS) and action.nargs != 0) \
            or action.default is False:
        shown = "false" if action.default is False else action.default
        text = f"{text} (default: {shown})"
    out = "  " + title
    if not text:
        return out + "\n"
    out += " " * (_HELP_COLUMN - len(title) - 2) if len(title) <= _TITLE_ROOM \
        else "\n" + " " * _HELP_COLUMN
    return out + wrap(text, FORMAT_WIDTH, _HELP_COLUMN, "", " " * _HELP_COLUMN) + "\n"


def _commands_help(action: argparse._SubParsersAction[Any], title: str) -> str:
    """The commands section: its title, the commands' metavar, then each command with its
    help from column 25."""
    helps = {choice.dest: choice.help for choice in action._choices_actions}
    out = f"\n{title}:\n  {action.metavar}\n"
    for name in action.choices:
        title, text = "  " + name, str(helps.get(name) or "")
        out += "  " + title
        out += " " * (_HELP_COLUMN - len(title) - 2) if len(title) <= _TITLE_ROOM \
            else "\n" + " " * _HELP_COLUMN
        out += wrap(text, FORMAT_WIDTH, _HELP_COLUMN, "", " " * _HELP_COLUMN) + "\n"
    return out


class _Help(argparse.Action):
    """-h: the help on standard output, then status 1, as Kafka's argparse4j tools end
    (argparse4j reports the help as an ArgumentParserException, which they exit 1 on)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser.print_help()
        parser.exit(1)


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors print argparse4j's usage and error line (on
    standard error, status 1). `usage_prog` is the program name argparse4j shows;
    `upper_items` what a command's usage starts with (the main parser's required
    options and the command's name)."""

    usage_prog = ""
    upper_items: tuple[str, ...] = ()
    commands_title = "subcommands"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["add_help"] = False
        super().__init__(*args, **kwargs)
        self.add_argument("-h", "--help", action=_Help, help="show this help message and exit")
    # a mutually exclusive group's description (argparse4j shows it above its arguments)
    group_descriptions: dict[int, str]

    def add_described_group(self, description: str,
                            required: bool = False) -> argparse._MutuallyExclusiveGroup:
        group = self.add_mutually_exclusive_group(required=required)
        if not hasattr(self, "group_descriptions"):
            self.group_descriptions = {}
        self.group_descriptions[id(group)] = description
        return group

    def add_subparsers(self, **kwargs: Any) -> argparse._SubParsersAction[Any]:
        self.commands_title = kwargs.get("title") or self.commands_title
        return super().add_subparsers(**kwargs)

    def usage_items(self) -> list[str]:
        in_groups = {id(a) for g in self._mutually_exclusive_groups for a in g._group_actions}
        items = list(self.upper_items)
        items += [_short(a, True) for a in self._actions
                  if a.option_strings and id(a) not in in_groups]
        for group in self._mutually_exclusive_groups:
            actions = group._group_actions
            if len(actions) == 1:
                items.append(_short(actions[0], not group.required))
                continue
            opening, closing = ("(", ")") if group.required else ("[", "]")
            shorts = [_short(a, False) for a in actions]
            items.append(opening + shorts[0])
            for short in shorts[1:-1]:
                items += ["|", short]
            items += ["|", shorts[-1] + closing]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                items += [str(action.metavar), "..."]
            elif not action.option_strings:
                items.append(str(action.metavar or action.dest))
        return items

    def format_help(self) -> str:
        """argparse4j's help (with its defaultHelp: each default shown): the usage, the
        description, the optional arguments, then each group's."""
        in_groups = {id(a) for g in self._mutually_exclusive_groups for a in g._group_actions}
        out = self.argparse4j_usage()
        if self.description:
            out += "\n" + wrap(self.description, FORMAT_WIDTH) + "\n"
        plain = [a for a in self._actions if a.option_strings and id(a) not in in_groups]
        if plain:
            out += "\noptional arguments:\n" + "".join(map(_help_entry, plain))
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                out += _commands_help(action, self.commands_title)
        descriptions = getattr(self, "group_descriptions", {})
        for group in self._mutually_exclusive_groups:
            out += "\n"
            if descriptions.get(id(group)):
                indent = " " * _GROUP_INDENT
                out += f"{indent}{wrap(descriptions[id(group)], FORMAT_WIDTH, 2, '', indent)}\n\n"
            out += "".join(map(_help_entry, group._group_actions))
        return out

    def argparse4j_help(self) -> str:
        return self.format_help()

    def argparse4j_usage(self) -> str:
        return usage(self.usage_prog or self.prog, self.usage_items())

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            # argparse4j finds them while reading the command's own arguments
            self._chosen(parsed).fail(f"unrecognized arguments: '{' '.join(extras)}'")
        return parsed

    def _chosen(self, parsed: argparse.Namespace) -> Parser:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
                if isinstance(chosen, Parser):
                    return chosen._chosen(parsed)
        return self

    def error(self, message: str) -> NoReturn:
        self.fail(argparse4j_message(message))

    def fail(self, message: str) -> NoReturn:
        """A usage error in argparse4j's words: the usage, then the error line."""
        sys.stderr.write(self.argparse4j_usage())
        sys.stderr.write(error(self.usage_prog or self.prog, message))
        sys.stderr.flush()
        raise SystemExit(1)
