"""kafka-dump-log on transactional files written here in Kafka's formats: markers in a
data segment, a `.txnindex`, and `__transaction_state` records with
--transaction-log-decoder, each printed as Kafka 3.9's DumpLogSegments prints them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from moldau.coordinator.transaction.log_records import transaction_log_key, transaction_log_value
from moldau.coordinator.transaction.metadata import TxnTransitMetadata
from moldau.coordinator.transaction.state import TransactionState
from moldau.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    SimpleRecord,
    build_batch,
    build_control_batch,
)
from moldau.storage.txn_index import AbortedTxn, TransactionIndex
from moldau.tools import dump_log

BASE = "00000000000000000000"
T0 = 1_700_000_000_000


def dump(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = dump_log.TOOL.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _records(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("| ")]


def _transit(state: TransactionState, partitions: set[tuple[str, int]], start: int
             ) -> TxnTransitMetadata:
    return TxnTransitMetadata(producer_id=4000, last_producer_id=-1, producer_epoch=2,
                              last_producer_epoch=-1, txn_timeout_ms=60000, state=state,
                              topic_partitions=frozenset(partitions), txn_start_timestamp=start,
                              txn_last_update_timestamp=T0 + 5)


def test_markers_are_printed_as_kafka_prints_them(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / f"{BASE}.log"
    data = build_batch([SimpleRecord(b"k", b"v", (), T0)], producer_id=7, producer_epoch=1,
                       base_sequence=0, is_transactional=True)
    commit = build_control_batch(CONTROL_COMMIT, producer_id=7, producer_epoch=1,
                                 coordinator_epoch=3, base_offset=1, timestamp=T0 + 1)
    abort = build_control_batch(CONTROL_ABORT, producer_id=8, producer_epoch=0,
                                coordinator_epoch=0, base_offset=2, timestamp=T0 + 2)
    log.write_bytes(data + commit + abort)
    code, out, err = dump(capsys, "--files", str(log), "--print-data-log")
    assert (code, err) == (0, "")
    assert _records(out) == [
        f"| offset: 0 CreateTime: {T0} keySize: 1 valueSize: 1 sequence: 0 headerKeys: [] "
        "key: k payload: v",
        f"| offset: 1 CreateTime: {T0 + 1} keySize: 4 valueSize: 6 sequence: -1 headerKeys: "
        "[] endTxnMarker: COMMIT coordinatorEpoch: 3",
        f"| offset: 2 CreateTime: {T0 + 2} keySize: 4 valueSize: 6 sequence: -1 headerKeys: "
        "[] endTxnMarker: ABORT coordinatorEpoch: 0",
    ]
    batches = [line for line in out.splitlines() if line.startswith("baseOffset:")]
    assert "isTransactional: true isControl: false" in batches[0]
    assert "producerId: 7 producerEpoch: 1" in batches[1]
    assert "isTransactional: true isControl: true" in batches[1]
    # deep iteration without the contents: the markers still show
    code, deep, _ = dump(capsys, "--files", str(log), "--deep-iteration")
    assert _records(deep)[1].endswith("headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3")
    assert " payload: " not in _records(deep)[0]
    # shallow: batches only
    code, shallow, _ = dump(capsys, "--files", str(log))
    assert _records(shallow) == []


def test_txn_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(str(path), 100)
    index.append(AbortedTxn(producer_id=9, first_offset=100, last_offset=104,
                            last_stable_offset=105))
    index.append(AbortedTxn(producer_id=12, first_offset=101, last_offset=110,
                            last_stable_offset=106))
    code, out, err = dump(capsys, "--files", str(path))
    assert (code, err) == (0, "")
    assert out == (
        f"Dumping {path}\n"
        "version: 0 producerId: 9 firstOffset: 100 lastOffset: 104 lastStableOffset: 105\n"
        "version: 0 producerId: 12 firstOffset: 101 lastOffset: 110 lastStableOffset: 106\n")
    empty = tmp_path / f"{BASE}.txnindex"
    empty.write_bytes(b"")
    assert dump(capsys, "--files", str(empty)) == (0, f"Dumping {empty}\n", "")
    missing = tmp_path / "00000000000000000200.txnindex"
    code, out, err = dump(capsys, "--files", str(missing))
    assert (code, err) == (1, f"{missing} (No such file or directory)\n")
    newer = tmp_path / "00000000000000000300.txnindex"
    newer.write_bytes(AbortedTxn(1, 300, 301, 302, version=1).encode())
    code, _, err = dump(capsys, "--files", str(newer))
    assert code == 1
    assert "Unexpected aborted transaction version 1" in err


def test_transaction_log_decoder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / f"{BASE}.log"
    key = transaction_log_key("app-1")
    values = [
        transaction_log_value(_transit(TransactionState.EMPTY, set(), -1)),
        transaction_log_value(_transit(TransactionState.ONGOING, {("out", 1), ("out", 0),
                                                                  ("audit", 2)}, T0)),
        transaction_log_value(_transit(TransactionState.COMPLETE_COMMIT, set(), T0), version=1),
        None,  # the id expired
    ]
    batches = [build_batch([SimpleRecord(key, value, (), T0)], base_offset=i)
               for i, value in enumerate(values)]
    unknown_key = b"\x00\x05" + b"whatever"
    batches.append(build_batch([SimpleRecord(unknown_key, b"\x00\x00", (), T0)], base_offset=4))
    batches.append(build_batch([SimpleRecord(key, b"\x00\x09junk", (), T0)], base_offset=5))
    log.write_bytes(b"".join(batches))
    code, out, err = dump(capsys, "--files", str(log), "--transaction-log-decoder")
    assert (code, err) == (0, "")
    tails = [line.split("headerKeys: [] ", 1)[1] for line in _records(out)]
    payload = "producerId:4000,producerEpoch:2,state={},partitions=[{}]," \
              f"txnLastUpdateTimestamp={T0 + 5},txnTimeoutMs=60000"
    prefix = "key: transaction_metadata::transactionalId=app-1 payload: "
    assert tails == [
        prefix + payload.format("Empty", ""),
        prefix + payload.format("Ongoing", "audit-2,out-0,out-1"),
        prefix + payload.format("CompleteCommit", ""),
        prefix + "<DELETE>",
        "key: unknown::version=5",
        "key: Error at offset 5, skipping. Unknown version 9 from the transaction log message "
        "value",
    ]
    # the decoder implies the contents: the same as with --print-data-log
    again = dump(capsys, "--files", str(log), "--transaction-log-decoder", "--print-data-log")
    assert again[1] == out
    assert os.path.getsize(log) > 0
