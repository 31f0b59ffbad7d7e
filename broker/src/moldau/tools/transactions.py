"""kafka-transactions.sh: Kafka 3.9's TransactionsCommand, to look at the transactions of
a cluster and to end hanging ones.

    kafka-transactions.sh --bootstrap-server HOST:PORT [--command-config FILE] COMMAND ...

`list [--duration-filter MS]`, `describe --transactional-id ID`, `describe-producers
--topic T --partition P [--broker-id B]`, `abort --topic T --partition P (--start-offset
O | --producer-id ID --producer-epoch E --coordinator-epoch C)` and `find-hanging
(--broker-id B | --topic T [--partition P]) [--max-transaction-timeout MINUTES]`, each
printing Kafka's tab-separated table. The command line is read as Kafka's argparse4j
parser reads it (usage and "kafka-transactions.sh: error: ..." on stderr, status 1); a
failed call is one line on stderr ("Failed to ...: <cause>. Enable debug logging for
additional detail.") and status 1."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TextIO

from moldau.tools.admin import Admin
from moldau.tools.argparse4j_usage import INTEGER, LONG, SHORT, Parser
from moldau.tools.options import ToolError
from moldau.tools.properties import load_properties
from moldau.tools.runner import KAFKA_VERSION
from moldau.tools.txn_admin import AbortSpec, TransactionsAdmin, TxnApi, topic_partition_text
from moldau.tools.txn_hanging import HEADERS as HANGING_HEADERS
from moldau.tools.txn_hanging import find_hanging
from moldau.tools.txn_output import CommandFailed, failed, print_table

PROG = "kafka-transactions.sh"
LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                    "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                    "TransactionDurationMs", "TopicPartitions")
PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                     "LastTimestamp", "CurrentTransactionStartOffset")
Now = Callable[[], int]


# --- the command line, as argparse4j reads it ---------------------------------------------

BOOTSTRAP_USAGE = "--bootstrap-server host:port"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description=(
        "This tool is used to analyze the transactional state of producers in the cluster. "
        "It can be used to detect and recover from hanging transactions."))
    parser.add_argument("-v", "--version", action="version", version=KAFKA_VERSION,
                        help="show the version of this Kafka distribution and exit")
    parser.add_argument("--command-config", metavar="FILE",
                        help="property file containing configs to be passed to admin client")
    parser.add_argument("--bootstrap-server", metavar="host:port", required=True,
                        help="hostname and port for the broker to connect to, in the form "
                             "`host:port`  (multiple comma-separated entries can be given)")
    parser.usage_prog = PROG
    commands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND",
                                     required=True, prog=f"{PROG} {BOOTSTRAP_USAGE}")

    listing = commands.add_parser("list", help="list transactions")
    listing.add_argument("--duration-filter", type=LONG, help=(
        "Duration (in millis) to filter by: if < 0, all transactions will be returned; "
        "otherwise, only transactions running longer than this duration will be returned"))

    describe = commands.add_parser(
        "describe", help="describe the state of an active transactional-id",
        description="Describe the state of an active transactional-id.")
    describe.add_argument("--transactional-id", required=True, help="transactional id")

    producers = commands.add_parser(
        "describe-producers", help="describe the states of active producers for a topic "
                                   "partition")
    producers.add_argument("--broker-id", type=INTEGER, help="optional broker id to describe "
                           "the producer state on a specific replica")
    producers.add_argument("--topic", required=True, help="topic name")
    producers.add_argument("--partition", type=INTEGER, required=True,
                           help="partition number")

    abort = commands.add_parser(
        "abort", help="abort a hanging transaction (requires administrative privileges)")
    abort.add_argument("--topic", required=True, help="topic name")
    abort.add_argument("--partition", type=INTEGER, required=True, help="partition number")
    newer = abort.add_argument_group(
        "Brokers on versions 3.0 and above",
        "For newer brokers, only the start offset of the transaction to be aborted is "
        "required")
    newer.add_argument("--start-offset", type=LONG,
                       help="start offset of the transaction to abort")
    older = abort.add_argument_group(
        "Brokers on versions older than 3.0",
        "For older brokers, you must provide all of these arguments")
    older.add_argument("--producer-id", type=LONG, help="producer id")
    older.add_argument("--producer-epoch", type=SHORT, help="producer epoch")
    older.add_argument("--coordinator-epoch", type=INTEGER, help="coordinator epoch")

    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=INTEGER,
                         help="broker id to search for hanging transactions")
    hanging.add_argument("--max-transaction-timeout", type=INTEGER, default=15, help=(
        "maximum transaction timeout in minutes to limit the scope of the search (15 "
        "minutes by default)"))
    hanging.add_argument("--topic", help="topic name to limit search to (required if "
                                         "--partition is specified)")
    hanging.add_argument("--partition", type=INTEGER, help="partition number")
    for name, command in commands.choices.items():
        # a command's usage starts as argparse4j's does: the tool's required option, the
        # command, and argparse4j names the tool alone in its errors
        assert isinstance(command, Parser)
        command.usage_prog, command.upper_items = PROG, (BOOTSTRAP_USAGE, name)
    return parser


# --- the commands -------------------------------------------------------------------------

def list_command(api: TxnApi, ns: argparse.Namespace, out: TextIO,
                 now: Now) -> None:
    duration = -1 if ns.duration_filter is None else ns.duration_filter
    try:
        by_broker = api.list_transactions(duration_ms=duration)
    except ToolError as exc:
        raise failed("Failed to list transactions", exc) from None
    rows = [[t.transactional_id, str(broker), str(t.producer_id), t.state]
            for broker in sorted(by_broker) for t in by_broker[broker]]
    print_table(LIST_HEADERS, rows, out)


def describe_command(api: TxnApi, ns: argparse.Namespace, out: TextIO,
                     now: Now) -> None:
    tid: str = ns.transactional_id
    context = f"Failed to describe transaction state of transactional-id `{tid}`"
    try:
        answer = api.describe_transactions([tid])[tid]
    except ToolError as exc:
        raise failed(context, exc) from None
    if isinstance(answer, ToolError):
        raise failed(context, answer)
    start = answer.transaction_start_time_ms
    row = [str(answer.coordinator_id), tid, str(answer.producer_id), str(answer.producer_epoch),
           answer.state, str(answer.transaction_timeout_ms),
           "None" if start is None else str(start),
           "None" if start is None else str(now() - start),
           ",".join(topic_partition_text(tp) for tp in sorted(answer.topic_partitions))]
    print_table(DESCRIBE_HEADERS, [row], out)


def describe_producers_command(api: TxnApi, ns: argparse.Namespace, out: TextIO,
                               now: Now) -> None:
    tp = (ns.topic, ns.partition)
    where = "leader" if ns.broker_id is None else f"broker {ns.broker_id}"
    context = f"Failed to describe producers for partition {topic_partition_text(tp)} on {where}"
    try:
        answer = api.describe_producers([tp], ns.broker_id)[tp]
    except ToolError as exc:
        raise failed(context, exc) from None
    if isinstance(answer, ToolError):
        raise failed(context, answer)
    rows = [[str(p.producer_id), str(p.producer_epoch),
             str(-1 if p.coordinator_epoch is None else p.coordinator_epoch),
             str(p.last_sequence), str(p.last_timestamp),
             "None" if p.current_txn_start_offset is None else str(p.current_txn_start_offset)]
            for p in answer]
    print_table(PRODUCERS_HEADERS, rows, out)


def abort_spec(api: TxnApi, ns: argparse.Namespace) -> AbortSpec:
    """The transaction to abort: from the command line, or found by its start offset
    among the partition's active producers."""
    tp = (ns.topic, ns.partition)
    if ns.start_offset is None and ns.producer_id is None:
        raise CommandFailed("The transaction to abort must be identified either with "
                            "--start-offset (for brokers on 3.0 or above) or with "
                            "--producer-id, --producer-epoch, and --coordinator-epoch (for "
                            "older brokers)")
    if ns.start_offset is None:
        if ns.producer_epoch is None:
            raise CommandFailed("Missing required argument --producer-epoch")
        if ns.coordinator_epoch is None:
            raise CommandFailed("Missing required argument --coordinator-epoch")
        # a producer that hung before any marker reached the partition shows -1; 0 is
        # at or below any coordinator epoch
        return AbortSpec(tp, ns.producer_id, ns.producer_epoch, max(ns.coordinator_epoch, 0))
    try:
        answer = api.describe_producers([tp])[tp]
        if isinstance(answer, ToolError):
            raise answer
    except ToolError as exc:
        raise failed("Failed to validate producer state for partition "
                     f"{topic_partition_text(tp)}", exc) from None
    for state in answer:
        if state.current_txn_start_offset == ns.start_offset:
            return AbortSpec(tp, state.producer_id, state.producer_epoch,
                             state.coordinator_epoch or 0)
    raise CommandFailed(f"Could not find any open transactions starting at offset "
                        f"{ns.start_offset} on partition {topic_partition_text(tp)}")


def abort_command(api: TxnApi, ns: argparse.Namespace, out: TextIO,
                  now: Now) -> None:
    spec = abort_spec(api, ns)
    try:
        api.abort_transaction(spec)
    except ToolError as exc:
        raise failed(f"Failed to abort transaction {spec}", exc) from None


def find_hanging_command(api: TxnApi, ns: argparse.Namespace, out: TextIO,
                         now: Now) -> None:
    rows = find_hanging(api, ns.broker_id, ns.topic, ns.partition,
                        ns.max_transaction_timeout, now)
    print_table(HANGING_HEADERS, rows, out)


COMMANDS: dict[str, Callable[[TxnApi, argparse.Namespace, TextIO, Now], None]] = {
    "list": list_command,
    "describe": describe_command,
    "describe-producers": describe_producers_command,
    "abort": abort_command,
    "find-hanging": find_hanging_command,
}


def now_ms() -> int:
    return int(time.time() * 1000)


def _admin(ns: argparse.Namespace) -> Admin:
    """buildAdminClient: the --command-config properties, --bootstrap-server over them."""
    config: dict[str, str] = {}
    if ns.command_config is not None:
        try:
            config = load_properties(ns.command_config)
        except ToolError as exc:
            raise failed("Failed to load admin client properties", exc) from None
    config["bootstrap.servers"] = ns.bootstrap_server
    return Admin(ns.bootstrap_server, config)


class TransactionsTool:
    """The tool's entry point for the registry (`moldau transactions`)."""

    name = "transactions"

    def main(self, argv: list[str]) -> int:
        try:
            ns = build_parser().parse_args(argv)
        except SystemExit as exc:  # usage errors (1), -h and --version (0)
            return exc.code if isinstance(exc.code, int) else 1
        try:
            with _admin(ns) as admin:
                COMMANDS[ns.command](TransactionsAdmin(admin), ns, sys.stdout, now_ms)
        except ToolError as exc:
            sys.stdout.flush()
            print(exc, file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        return 0


TOOL = TransactionsTool()
