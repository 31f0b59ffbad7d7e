"""kafka-transactions.sh without a broker: the command line as argparse4j reads it, Kafka's
table, the find-hanging decision and every command's output and failures, over a fake of
the admin calls."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pytest

from moldau.tools import transactions
from moldau.tools.txn_admin import (
    TP,
    AbortSpec,
    AdminFailure,
    PartitionInfo,
    ProducerState,
    TransactionalIdNotFound,
    TransactionDescription,
    TransactionListing,
)
from moldau.tools.txn_hanging import OpenTransaction, by_producer, candidates, hanging
from moldau.tools.txn_output import CommandFailed, table

from .toolrun import short_wait_config

NOW = 1_700_000_000_000
HOUR = 3_600_000


def producer(pid: int, start: int | None, age_ms: int = 2 * HOUR, epoch: int = 0,
             coordinator_epoch: int | None = 3) -> ProducerState:
    return ProducerState(pid, epoch, 4, NOW - age_ms, coordinator_epoch, start)


def description(*partitions: TP, state: str = "Ongoing", start: int | None = NOW - 5000
                ) -> TransactionDescription:
    return TransactionDescription(2, state, 7, 1, 60000, start, frozenset(partitions))


@dataclass
class FakeAdmin:
    """The admin calls, answered from tables; records what was asked."""

    topics: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)
    producers: dict[TP, list[ProducerState] | AdminFailure] = field(default_factory=dict)
    listings: dict[int, list[TransactionListing]] = field(default_factory=dict)
    descriptions: dict[str, TransactionDescription | AdminFailure] = field(default_factory=dict)
    aborted: list[AbortSpec] = field(default_factory=list)
    asked: list[tuple[str, object]] = field(default_factory=list)

    def list_topics(self) -> list[str]:
        return sorted(self.topics)

    def describe_topics(self, topics: Sequence[str]) -> list[PartitionInfo]:
        self.asked.append(("describe_topics", list(topics)))
        if any(t not in self.topics for t in topics):
            raise AdminFailure("This server does not host this topic-partition.")
        return [PartitionInfo(t, p, replicas) for t in topics
                for p, replicas in enumerate(self.topics[t])]

    def describe_producers(self, partitions: Iterable[TP], broker_id: int | None = None
                           ) -> dict[TP, list[ProducerState] | AdminFailure]:
        wanted = sorted(partitions)
        self.asked.append(("describe_producers", (wanted, broker_id)))
        return {tp: self.producers.get(tp, []) for tp in wanted}

    def list_transactions(self, producer_ids: Iterable[int] = (), duration_ms: int = -1
                          ) -> dict[int, list[TransactionListing]]:
        ids = set(producer_ids)
        self.asked.append(("list_transactions", (sorted(ids), duration_ms)))
        return {b: [t for t in ts if not ids or t.producer_id in ids]
                for b, ts in self.listings.items()}

    def describe_transactions(self, transactional_ids: Iterable[str]
                              ) -> dict[str, TransactionDescription | AdminFailure]:
        ids = sorted(transactional_ids)
        self.asked.append(("describe_transactions", ids))
        return {t: self.descriptions.get(t, TransactionalIdNotFound("not found")) for t in ids}

    def abort_transaction(self, spec: AbortSpec) -> None:
        self.aborted.append(spec)


def run(fake: FakeAdmin, *args: str) -> str:
    """One command through the parser, its output."""
    ns = transactions.build_parser().parse_args(["--bootstrap-server", "b:9092", *args])
    out = io.StringIO()
    transactions.COMMANDS[ns.command](fake, ns, out, lambda: NOW)
    return out.getvalue()


def fails(fake: FakeAdmin, *args: str) -> str:
    with pytest.raises(CommandFailed) as caught:
        run(fake, *args)
    return str(caught.value)


# --- the command line ---------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "message"), [
    # argparse4j finds the missing command before the missing required option
    ([], "kafka-transactions.sh: error: too few arguments"),
    (["--bootstrap-server", "b:1"], "kafka-transactions.sh: error: too few arguments"),
    (["--bootstrap-server", "b:1", "lists"],
     "kafka-transactions.sh: error: invalid choice: 'lists'"),
    # a command's errors name the tool alone, as argparse4j's (Kafka 3.9.1, the lab)
    (["--bootstrap-server", "b:1", "describe"],
     "\nkafka-transactions.sh: error: argument --transactional-id is required"),
    (["--bootstrap-server", "b:1", "describe-producers", "--topic", "t"],
     "\nkafka-transactions.sh: error: argument --partition is required"),
    (["--bootstrap-server", "b:1", "abort", "--topic", "t", "--partition", "x"],
     "argument --partition: could not convert 'x' to Integer (For input string: \"x\")"),
    (["--bootstrap-server", "b:1", "abort", "--topic", "t", "--partition", "0",
      "--producer-epoch", "40000"],
     "argument --producer-epoch: could not convert '40000' to Short (Value out of range. "
     "Value:\"40000\" Radix:10)"),
    (["--bootstrap-server", "b:1", "list", "--duration-filter", "1_000"],
     "could not convert '1_000' to Long"),
    (["--bootstrap-server", "b:1", "list", "--topic", "t"],
     "kafka-transactions.sh: error: unrecognized arguments: '--topic t'"),
])
def test_bad_command_lines_get_usage_and_status_1(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert transactions.TOOL.main(argv) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("usage: kafka-transactions.sh")
    # argparse4j wraps and justifies the error line: compared with its spaces collapsed
    words = " ".join(err.split())
    assert " ".join(message.split()) in words
    if len(argv) > 2 and argv[2] in ("describe", "describe-producers"):
        assert words.startswith("usage: kafka-transactions.sh --bootstrap-server host:port "
                                f"{argv[2]}")


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert transactions.TOOL.main(["--version"]) == 0
    assert capsys.readouterr().out == "3.9.0\n"
    # argparse4j reports -h as a parse exception, which TransactionsCommand exits 1 on
    assert transactions.TOOL.main(["find-hanging", "--help"]) == 1
    assert "--max-transaction-timeout" in capsys.readouterr().out


def test_a_missing_command_config_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = transactions.TOOL.main(["--bootstrap-server", "localhost:1", "--command-config",
                                   "/nonexistent.properties", "list"])
    assert code == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("Failed to load admin client properties: /nonexistent.properties (No such "
                   "file or directory). Enable debug logging for additional detail.\n")


def test_an_unreachable_cluster_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert transactions.TOOL.main(["--bootstrap-server", "localhost:1", "--command-config",
                                   short_wait_config(), "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Failed to list transactions: Could not connect to any bootstrap "
                          "server: localhost:1")
    assert err.endswith(". Enable debug logging for additional detail.\n")
    assert err.count("\n") == 1


# --- the table ----------------------------------------------------------------------------

def test_table_pads_every_column_and_ends_each_with_a_tab() -> None:
    assert table(("A", "Long header"), [["wide cell", "x"], ["y", ""]]) == [
        "A        \tLong header\t",
        "wide cell\tx          \t",
        "y        \t           \t",
    ]
    assert table(("One", "Two"), []) == ["One\tTwo\t"]


# --- list, describe, describe-producers ---------------------------------------------------

def test_list_rows_by_broker_id() -> None:
    fake = FakeAdmin(listings={
        3: [TransactionListing("txn-b", 11, "CompleteCommit")],
        1: [TransactionListing("txn-a", 10, "Ongoing"), TransactionListing("t", 12, "Empty")],
    })
    assert run(fake, "list", "--duration-filter", "5000") == (
        "TransactionalId\tCoordinator\tProducerId\tTransactionState\t\n"
        "txn-a          \t1          \t10        \tOngoing         \t\n"
        "t              \t1          \t12        \tEmpty           \t\n"
        "txn-b          \t3          \t11        \tCompleteCommit  \t\n")
    assert fake.asked == [("list_transactions", ([], 5000))]
    assert run(FakeAdmin(), "list") == (
        "TransactionalId\tCoordinator\tProducerId\tTransactionState\t\n")


def test_list_failure() -> None:
    class Failing(FakeAdmin):
        def list_transactions(self, producer_ids: Iterable[int] = (), duration_ms: int = -1
                              ) -> dict[int, list[TransactionListing]]:
            raise AdminFailure("ListTransactions request sent to broker 2 failed because the "
                               "coordinator is shutting down")
    assert fails(Failing(), "list") == (
        "Failed to list transactions: ListTransactions request sent to broker 2 failed "
        "because the coordinator is shutting down. Enable debug logging for additional "
        "detail.")


def test_describe() -> None:
    fake = FakeAdmin(descriptions={"app": description(("b", 1), ("a", 0))})
    lines = run(fake, "describe", "--transactional-id", "app").splitlines()
    assert lines[0].split("\t")[:-1] == list(transactions.DESCRIBE_HEADERS)
    assert [c.strip() for c in lines[1].split("\t")] == [
        "2", "app", "7", "1", "Ongoing", "60000", str(NOW - 5000), "5000", "a-0,b-1", ""]
    fake.descriptions["idle"] = description(state="Empty", start=None)
    idle = run(fake, "describe", "--transactional-id", "idle").splitlines()[1]
    assert [c.strip() for c in idle.split("\t")][4:9] == ["Empty", "60000", "None", "None", ""]


def test_describe_unknown_id() -> None:
    fake = FakeAdmin(descriptions={"x": TransactionalIdNotFound(
        "DescribeTransactions request for transactionalId `x` failed because the ID could "
        "not be found")})
    assert fails(fake, "describe", "--transactional-id", "x") == (
        "Failed to describe transaction state of transactional-id `x`: DescribeTransactions "
        "request for transactionalId `x` failed because the ID could not be found. Enable "
        "debug logging for additional detail.")


def test_describe_producers() -> None:
    fake = FakeAdmin(producers={("t", 0): [producer(5, 42), producer(6, None,
                                                                      coordinator_epoch=None)]})
    out = run(fake, "describe-producers", "--topic", "t", "--partition", "0")
    assert [[c.strip() for c in line.split("\t")][:-1] for line in out.splitlines()] == [
        list(transactions.PRODUCERS_HEADERS),
        ["5", "0", "3", "4", str(NOW - 2 * HOUR), "42"],
        ["6", "0", "-1", "4", str(NOW - 2 * HOUR), "None"],
    ]
    assert fake.asked == [("describe_producers", ([("t", 0)], None))]
    run(fake, "describe-producers", "--topic", "t", "--partition", "0", "--broker-id", "2")
    assert fake.asked[-1] == ("describe_producers", ([("t", 0)], 2))


def test_describe_producers_failure_names_the_broker() -> None:
    fake = FakeAdmin(producers={("t", 0): AdminFailure("Failed to describe active producers "
                                                       "for partition t-0 on brokerId 2")})
    assert fails(fake, "describe-producers", "--topic", "t", "--partition", "0",
                 "--broker-id", "2") == (
        "Failed to describe producers for partition t-0 on broker 2: Failed to describe "
        "active producers for partition t-0 on brokerId 2. Enable debug logging for "
        "additional detail.")
    fake.producers[("t", 0)] = AdminFailure("boom")
    assert fails(fake, "describe-producers", "--topic", "t", "--partition", "0").startswith(
        "Failed to describe producers for partition t-0 on leader: boom.")


# --- abort --------------------------------------------------------------------------------

def test_abort_by_start_offset_uses_the_producer_found() -> None:
    fake = FakeAdmin(producers={("t", 1): [producer(5, 40, epoch=2, coordinator_epoch=None),
                                           producer(6, 42, epoch=3)]})
    assert run(fake, "abort", "--topic", "t", "--partition", "1", "--start-offset", "40") == ""
    assert fake.aborted == [AbortSpec(("t", 1), 5, 2, 0)]
    assert str(fake.aborted[0]) == ("AbortTransactionSpec(topicPartition=t-1, producerId=5, "
                                    "producerEpoch=2, coordinatorEpoch=0)")
    assert fails(fake, "abort", "--topic", "t", "--partition", "1", "--start-offset", "41") \
        == "Could not find any open transactions starting at offset 41 on partition t-1"


def test_abort_by_producer_fields() -> None:
    fake = FakeAdmin()
    run(fake, "abort", "--topic", "t", "--partition", "0", "--producer-id", "9",
        "--producer-epoch", "4", "--coordinator-epoch", "-1")
    assert fake.aborted == [AbortSpec(("t", 0), 9, 4, 0)]
    assert fails(fake, "abort", "--topic", "t", "--partition", "0") == (
        "The transaction to abort must be identified either with --start-offset (for brokers "
        "on 3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch "
        "(for older brokers)")
    assert fails(fake, "abort", "--topic", "t", "--partition", "0", "--producer-id", "9") \
        == "Missing required argument --producer-epoch"
    assert fails(fake, "abort", "--topic", "t", "--partition", "0", "--producer-id", "9",
                 "--producer-epoch", "1") == "Missing required argument --coordinator-epoch"
    assert len(fake.aborted) == 1


def test_abort_failure_names_the_spec() -> None:
    class Fenced(FakeAdmin):
        def abort_transaction(self, spec: AbortSpec) -> None:
            raise AdminFailure(f"WriteTxnMarkers request with {spec} failed due an invalid "
                               "producer epoch")
    message = fails(Fenced(), "abort", "--topic", "t", "--partition", "0", "--producer-id",
                    "9", "--producer-epoch", "4", "--coordinator-epoch", "7")
    spec = "AbortTransactionSpec(topicPartition=t-0, producerId=9, producerEpoch=4, " \
           "coordinatorEpoch=7)"
    assert message == (f"Failed to abort transaction {spec}: WriteTxnMarkers request with "
                       f"{spec} failed due an invalid producer epoch. Enable debug logging "
                       "for additional detail.")


# --- find-hanging -------------------------------------------------------------------------

def test_candidates_are_open_and_older_than_the_timeout() -> None:
    states = {("t", 0): [producer(1, 10), producer(2, None), producer(3, 11, age_ms=60_000)]}
    assert [c.producer.producer_id for c in candidates(states, NOW, 15 * 60_000)] == [1]
    assert [c.producer.producer_id for c in candidates(states, NOW, 0)] == [1, 3]


def test_hanging_decision() -> None:
    open_txns = [OpenTransaction(("t", 0), producer(1, 10)),  # no transactional id
                 OpenTransaction(("t", 0), producer(2, 11)),  # coordinator lists t-0
                 OpenTransaction(("t", 1), producer(2, 12)),  # ... but not t-1
                 OpenTransaction(("t", 0), producer(3, 13)),  # id not found
                 OpenTransaction(("u", 0), producer(4, 14))]  # coordinator lists u-0
    found = hanging(by_producer(open_txns), {2: "two", 3: "three", 4: "four"},
                    {"two": description(("t", 0)), "three": None,
                     "four": description(("u", 0), state="PrepareAbort")})
    assert [(t.topic_partition, t.producer.producer_id) for t in found] == [
        (("t", 0), 1), (("t", 1), 2), (("t", 0), 3)]


def _hanging_fake() -> FakeAdmin:
    return FakeAdmin(
        topics={"t": [(1, 2), (2, 3)], "__consumer_offsets": [(1,)]},
        producers={("t", 0): [producer(1, 10, epoch=5), producer(2, 20, age_ms=1000)],
                   ("t", 1): [producer(3, 30, coordinator_epoch=None)]},
        listings={1: [TransactionListing("app", 3, "Ongoing")]},
        descriptions={"app": description(("t", 1))})


def test_find_hanging_by_topic() -> None:
    fake = _hanging_fake()
    out = run(fake, "find-hanging", "--topic", "t")
    assert out == (
        "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\t"
        "LastTimestamp\tDuration(min)\t\n"
        f"t    \t0        \t1         \t5            \t3               \t10         \t"
        f"{NOW - 2 * HOUR}\t120          \t\n")
    assert fake.asked == [
        ("describe_topics", ["t"]),
        ("describe_producers", ([("t", 0), ("t", 1)], None)),
        ("list_transactions", ([1, 3], -1)),
        ("describe_transactions", ["app"]),
    ]


def test_find_hanging_by_broker_searches_its_replicas_of_every_topic() -> None:
    fake = _hanging_fake()
    out = run(fake, "find-hanging", "--broker-id", "3", "--max-transaction-timeout", "0")
    assert ("describe_producers", ([("t", 1)], 3)) in fake.asked
    assert out.splitlines()[1:] == []  # producer 3 is in app's transaction on t-1
    fake.descriptions["app"] = description(("t", 0))
    out = run(fake, "find-hanging", "--broker-id", "3")
    assert [[c.strip() for c in line.split("\t")[:3]] for line in out.splitlines()[1:]] \
        == [["t", "1", "3"]]
    assert out.splitlines()[1].split("\t")[4].strip() == "-1"


def test_find_hanging_nothing_open_asks_no_coordinator() -> None:
    fake = FakeAdmin(producers={("t", 0): [producer(1, None)]})
    assert run(fake, "find-hanging", "--topic", "t", "--partition", "0") == (
        "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\t"
        "LastTimestamp\tDuration(min)\t\n")
    assert [name for name, _ in fake.asked] == ["describe_producers"]


def test_find_hanging_failures() -> None:
    fake = _hanging_fake()
    assert fails(fake, "find-hanging") == (
        "The `find-hanging` command requires either --topic or --broker-id to limit the "
        "scope of the search")
    assert fails(fake, "find-hanging", "--broker-id", "1", "--partition", "0") == (
        "The --partition argument requires --topic to be provided")
    assert fails(fake, "find-hanging", "--topic", "nope") == (
        "Failed to describe 1 topics: This server does not host this topic-partition.. "
        "Enable debug logging for additional detail.")
    fake.producers[("t", 1)] = AdminFailure("refused")
    assert fails(fake, "find-hanging", "--broker-id", "2") == (
        "Failed to describe producers for 2 partitions on broker Optional[2]: refused. "
        "Enable debug logging for additional detail.")
    assert fails(fake, "find-hanging", "--topic", "t").startswith(
        "Failed to describe producers for 2 partitions on broker Optional.empty: refused.")
    fake.producers[("t", 1)] = [producer(3, 30)]
    fake.descriptions["app"] = AdminFailure("denied")
    assert fails(fake, "find-hanging", "--topic", "t") == (
        "Failed to describe 1 transactions: denied. Enable debug logging for additional "
        "detail.")
