"""The client tools' transactional parts without a broker: what the console consumer keeps
under read_committed, and the perf test's transactions (Kafka's ConfigPostProcessor and
its begin/commit rhythm) over a fake producer."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from moldau.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    RecordBatch,
    SimpleRecord,
    build_batch,
    build_control_batch,
)
from moldau.tools import perf
from moldau.tools.options import UsageError
from moldau.tools.read_committed import AbortedFilter, is_abort_marker


@dataclass
class Aborted:
    producer_id: int
    first_offset: int


def _data(offset: int, producer_id: int, transactional: bool = True,
          count: int = 1) -> RecordBatch:
    return RecordBatch(build_batch([SimpleRecord(None, b"x", (), 0)] * count,
                                   base_offset=offset, producer_id=producer_id,
                                   producer_epoch=0, base_sequence=offset,
                                   is_transactional=transactional))


def _marker(kind: int, offset: int, producer_id: int) -> RecordBatch:
    return RecordBatch(build_control_batch(kind, producer_id=producer_id, producer_epoch=0,
                                           coordinator_epoch=1, base_offset=offset))


def test_read_committed_drops_aborted_batches_and_markers() -> None:
    batches = [
        _data(0, 5, count=2),              # 0-1: producer 5, aborted below
        _data(2, 6),                       # producer 6, committed
        _data(3, -1, transactional=False),  # a plain batch
        _marker(CONTROL_ABORT, 4, 5),
        _marker(CONTROL_COMMIT, 5, 6),
        _data(6, 5),                       # producer 5's next transaction: not aborted
        _data(7, 7),                       # producer 7: aborted, its marker not fetched yet
    ]
    kept = AbortedFilter([Aborted(7, 7), Aborted(5, 0)])
    assert [kept.keep(b) for b in batches] == [False, True, True, False, False, True, False]
    # read_uncommitted (no list): every data batch, no marker
    everything = AbortedFilter(None)
    assert [everything.keep(b) for b in batches] == [True, True, True, False, False, True,
                                                     True]
    assert is_abort_marker(batches[3]) and not is_abort_marker(batches[4])
    assert not is_abort_marker(batches[0])


def test_an_aborted_transaction_starting_inside_a_batch_drops_it() -> None:
    kept = AbortedFilter([Aborted(5, 1)])
    assert not kept.keep(_data(0, 5, count=3))  # offsets 0-2: the transaction began at 1


def _options(*argv: str) -> perf.Options:
    required = ["--topic", "t", "--num-records", "1", "--throughput", "-1", "--record-size", "1"]
    return perf.producer_options([*required, *argv])


def test_transactions_are_on_with_a_duration_an_id_or_a_property() -> None:
    config: dict[str, str] = {}
    assert perf.transaction_settings(_options(), config) is None
    assert config == {}
    assert perf.transaction_settings(_options("--transaction-duration-ms", "500"), config) == 500
    assert config["transactional.id"].startswith("performance-producer-")
    assert len(config["transactional.id"]) == len("performance-producer-") + 36
    config = {"transactional.id": "from-props"}
    assert perf.transaction_settings(_options(), config) == 3000
    assert config["transactional.id"] == "from-props"
    assert perf.transaction_settings(_options("--transactional-id", "opt"), config) == 3000
    assert config["transactional.id"] == "opt"
    with pytest.raises(UsageError, match="--transaction-duration-ms should be greater than "
                                         "zero"):
        perf.transaction_settings(_options("--transaction-duration-ms", "0"), {})


@dataclass
class FakeProducer:
    calls: list[str] = field(default_factory=list)

    def init_transactions(self) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def commit_transaction(self) -> None:
        self.calls.append("commit")


def test_a_transaction_is_committed_once_it_is_as_old_as_the_duration() -> None:
    producer = FakeProducer()
    txns = perf.Transactions(producer, 1000)  # type: ignore[arg-type]
    for sent_at in (0.0, 0.5, 0.99, 1.0, 1.2, 1.3):
        txns.before_send()
        if producer.calls[-1] == "begin":
            txns.started = sent_at  # the clock of this test
        producer.calls.append("send")
        txns.after_send(sent_at)
    txns.finish()
    assert producer.calls == ["init", "begin", "send", "send", "send", "send", "commit",
                              "begin", "send", "send", "commit"]
    off = FakeProducer()
    plain = perf.Transactions(off, None)  # type: ignore[arg-type]
    plain.before_send()
    plain.after_send(5.0)
    plain.finish()
    assert off.calls == []
