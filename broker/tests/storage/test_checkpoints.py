"""Checkpoint files, partition.metadata and meta.properties in Kafka's text formats."""

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from moldau.storage import files
from moldau.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointError,
    EpochEntry,
    InconsistentBrokerIdError,
    InconsistentClusterIdError,
    MetaProperties,
    MetaPropertiesError,
    PartitionMetadata,
    check_meta_properties,
    format_meta_properties,
    kafka_uuid_from_str,
    kafka_uuid_to_str,
    read_leader_epoch_checkpoint,
    read_meta_properties,
    read_offset_checkpoint,
    read_partition_metadata,
    write_leader_epoch_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
    write_partition_metadata,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "storage"
FUNCTION_TMP = settings(
    max_examples=examples(50), deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

GOLDEN_OFFSETS = {
    ("orders", 0): 1234,
    ("orders", 1): 0,
    ("__consumer_offsets", 17): 2**63 - 1,
}
GOLDEN_EPOCHS = [EpochEntry(0, 0), EpochEntry(2, 1500), EpochEntry(5, 98765)]
GOLDEN_TOPIC_ID = UUID(bytes=bytes(range(16)))
CLUSTER_ID = "Nk018hRAQFytWskYqtQduw"
GOLDEN_NOW = datetime(2024, 1, 2, 10, 0, 0, tzinfo=UTC)

# Kafka's legal topic characters.
topics = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=60,
)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)


def write(tmp_path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


# -- offset checkpoints --------------------------------------------------------------------------


def test_golden_offset_checkpoint(tmp_path):
    assert read_offset_checkpoint(DATA / RECOVERY_POINT_CHECKPOINT) == GOLDEN_OFFSETS
    out = tmp_path / RECOVERY_POINT_CHECKPOINT
    write_offset_checkpoint(out, GOLDEN_OFFSETS)
    assert out.read_bytes() == (DATA / RECOVERY_POINT_CHECKPOINT).read_bytes()
    assert sorted(os.listdir(tmp_path)) == [RECOVERY_POINT_CHECKPOINT]  # no .tmp left over


@FUNCTION_TMP
@given(st.dictionaries(st.tuples(topics, int32s), int64s, max_size=30))
def test_offset_checkpoint_round_trip(tmp_path, offsets):
    path = tmp_path / "replication-offset-checkpoint"
    write_offset_checkpoint(path, offsets, sync=False)
    assert read_offset_checkpoint(path) == offsets


@pytest.mark.parametrize("content", [None, "", "0\n", "0\n0\n"])
def test_offset_checkpoint_without_entries(tmp_path, content):
    path = tmp_path / "log-start-offset-checkpoint"
    if content is not None:
        path.write_text(content)
    assert read_offset_checkpoint(path) == {}


def test_offset_checkpoint_line_endings_and_separators(tmp_path):
    path = write(tmp_path, "cp", "0\r\n2\r\na 0  5\rb\t1\t6 \n")
    assert read_offset_checkpoint(path) == {("a", 0): 5, ("b", 1): 6}


def test_malformed_line_names_file_and_line():
    path = DATA / "checkpoint-malformed-line"
    with pytest.raises(CheckpointError, match="malformed line 4") as err:
        read_offset_checkpoint(path)
    assert err.value.path == str(path) and err.value.line_no == 4
    assert str(path) in str(err.value) and "'orders x 5'" in str(err.value)
    assert isinstance(err.value, OSError)  # an I/O-level failure, like Kafka's IOException


def test_wrong_entry_count():
    with pytest.raises(CheckpointError, match=r"expected 3 entries .* but found 2"):
        read_offset_checkpoint(DATA / "checkpoint-wrong-count")


def test_unknown_version():
    with pytest.raises(CheckpointError, match="unrecognised version 1"):
        read_offset_checkpoint(DATA / "checkpoint-bad-version")


@pytest.mark.parametrize(
    "content, line_no",
    [
        ("zero\n", 1),
        ("0\ntwo\n", 2),
        ("0\n1\n a 0 5\n", 3),  # leading whitespace: Java's split gives an empty first field
        ("0\n1\na 0\n", 3),
        ("0\n1\na 0 5 7\n", 3),
        ("0\n1\na 2147483648 5\n", 3),  # partition beyond int32
        ("0\n1\na 0 9223372036854775808\n", 3),  # offset beyond int64
        ("0\n1\na 0 1_000\n", 3),
        ("0\n2\na 0 5\n\n", 4),  # a blank line is a malformed entry
    ],
)
def test_malformed_offset_checkpoints(tmp_path, content, line_no):
    with pytest.raises(CheckpointError) as err:
        read_offset_checkpoint(write(tmp_path, "cp", content))
    assert err.value.line_no == line_no


def test_invalid_utf8(tmp_path):
    with pytest.raises(CheckpointError, match="UTF-8"):
        read_offset_checkpoint(write(tmp_path, "cp", b"0\n1\n\xff 0 1\n"))


def test_writer_refuses_unwritable_topics(tmp_path):
    for topic in ("", "two words"):
        with pytest.raises(ValueError):
            write_offset_checkpoint(tmp_path / "cp", {(topic, 0): 1})


def test_write_replaces_and_cleans_up_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "cp"
    write_offset_checkpoint(path, {("a", 0): 1})
    write_offset_checkpoint(path, {("b", 0): 2})
    assert read_offset_checkpoint(path) == {("b", 0): 2}

    def broken_replace(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(files.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        write_offset_checkpoint(path, {("c", 0): 3})
    assert sorted(os.listdir(tmp_path)) == ["cp"]
    assert read_offset_checkpoint(path) == {("b", 0): 2}


def test_atomic_write_syncs_directory(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(files, "fsync_dir", lambda p: synced.append(os.fspath(p)))
    files.atomic_write(tmp_path / "f", b"x")
    files.atomic_write(tmp_path / "g", b"y", sync=False)
    assert synced == [str(tmp_path)]
    assert (tmp_path / "f").read_bytes() == b"x"


# -- leader-epoch-checkpoint ---------------------------------------------------------------------


def test_golden_leader_epoch_checkpoint(tmp_path):
    assert read_leader_epoch_checkpoint(DATA / LEADER_EPOCH_CHECKPOINT) == GOLDEN_EPOCHS
    out = tmp_path / LEADER_EPOCH_CHECKPOINT
    write_leader_epoch_checkpoint(out, GOLDEN_EPOCHS)
    assert out.read_bytes() == (DATA / LEADER_EPOCH_CHECKPOINT).read_bytes()


@FUNCTION_TMP
@given(st.lists(st.tuples(int32s, int64s), max_size=20))
def test_leader_epoch_round_trip(tmp_path, entries):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    write_leader_epoch_checkpoint(path, entries, sync=False)
    assert read_leader_epoch_checkpoint(path) == entries


@pytest.mark.parametrize("content", ["0\n1\n3\n", "0\n1\n3 4 5\n", "0\n1\nx 4\n", "0\n2\n1 0\n"])
def test_malformed_leader_epoch_checkpoints(tmp_path, content):
    with pytest.raises(CheckpointError):
        read_leader_epoch_checkpoint(write(tmp_path, LEADER_EPOCH_CHECKPOINT, content))


# -- Kafka Uuid text and partition.metadata ------------------------------------------------------


def test_kafka_uuid_text():
    assert kafka_uuid_to_str(GOLDEN_TOPIC_ID) == "AAECAwQFBgcICQoLDA0ODw"
    assert kafka_uuid_from_str("AAECAwQFBgcICQoLDA0ODw") == GOLDEN_TOPIC_ID
    assert kafka_uuid_from_str("AAECAwQFBgcICQoLDA0ODw==") == GOLDEN_TOPIC_ID  # padded form
    all_ones = UUID(int=2**128 - 1)
    assert kafka_uuid_to_str(all_ones) == "_____________________w"  # URL-safe alphabet
    for bad in ("", "AAECAwQFBgcICQoLDA0OD", "AAECAwQFBgcICQoLDA0ODwAA", "AAECAwQFBgcICQoLDA0OD+"):
        with pytest.raises(ValueError):
            kafka_uuid_from_str(bad)


@given(st.uuids(allow_nil=True))
def test_kafka_uuid_round_trip(value):
    text = kafka_uuid_to_str(value)
    assert len(text) == 22 and "=" not in text
    assert kafka_uuid_from_str(text) == value


def test_golden_partition_metadata(tmp_path):
    meta = read_partition_metadata(DATA / PARTITION_METADATA)
    assert meta == PartitionMetadata(0, GOLDEN_TOPIC_ID)
    out = tmp_path / PARTITION_METADATA
    write_partition_metadata(out, GOLDEN_TOPIC_ID)
    assert out.read_bytes() == (DATA / PARTITION_METADATA).read_bytes()


@FUNCTION_TMP
@given(st.uuids(allow_nil=False))
def test_partition_metadata_round_trip(tmp_path, topic_id):
    path = tmp_path / PARTITION_METADATA
    write_partition_metadata(path, topic_id, sync=False)
    assert read_partition_metadata(path).topic_id == topic_id


def test_partition_metadata_accepts_later_versions_and_trailing_newline(tmp_path):
    path = write(tmp_path, PARTITION_METADATA, "version: 3\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n")
    assert read_partition_metadata(path) == PartitionMetadata(3, GOLDEN_TOPIC_ID)


@pytest.mark.parametrize(
    "content, line_no",
    [
        ("", 1),
        ("version: 0\n", 2),
        ("version:0\ntopic_id: AAECAwQFBgcICQoLDA0ODw", 1),
        ("version: x\ntopic_id: AAECAwQFBgcICQoLDA0ODw", 1),
        ("version: -1\ntopic_id: AAECAwQFBgcICQoLDA0ODw", 1),
        ("version: 0\ntopicid: AAECAwQFBgcICQoLDA0ODw", 2),
        ("version: 0\ntopic_id: not-a-uuid", 2),
        ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 2),  # the zero Uuid
    ],
)
def test_malformed_partition_metadata(tmp_path, content, line_no):
    with pytest.raises(CheckpointError) as err:
        read_partition_metadata(write(tmp_path, PARTITION_METADATA, content))
    assert err.value.line_no == line_no
    assert PARTITION_METADATA in str(err.value)


def test_partition_metadata_missing_and_zero_id(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_partition_metadata(tmp_path / PARTITION_METADATA)
    with pytest.raises(ValueError):
        write_partition_metadata(tmp_path / PARTITION_METADATA, UUID(int=0))


# -- meta.properties ------------------------------------------------------------------------------


def test_golden_meta_properties(tmp_path):
    meta = read_meta_properties(DATA / META_PROPERTIES)
    assert meta == MetaProperties(version=0, broker_id=1, cluster_id=CLUSTER_ID)
    assert format_meta_properties(meta, GOLDEN_NOW) == (DATA / META_PROPERTIES).read_bytes()
    write_meta_properties(tmp_path, meta, now=GOLDEN_NOW)
    assert (tmp_path / META_PROPERTIES).read_bytes() == (DATA / META_PROPERTIES).read_bytes()


def test_meta_properties_in_older_key_order():
    meta = read_meta_properties(DATA / "meta.properties.hash-order")
    assert meta == MetaProperties(version=0, broker_id=0, cluster_id=CLUSTER_ID)


def test_meta_properties_versions_and_directory_id(tmp_path):
    assert read_meta_properties(tmp_path) is None
    dir_id = UUID(int=12345678901234567890)
    write_meta_properties(tmp_path, MetaProperties(0, 3, "c1", dir_id))
    assert read_meta_properties(tmp_path) == MetaProperties(0, 3, "c1", dir_id)
    write(tmp_path, META_PROPERTIES, "broker.id=4\n")  # no version: v0, no cluster yet
    assert read_meta_properties(tmp_path) == MetaProperties(0, 4, None)
    write(tmp_path, META_PROPERTIES, "version=1\nnode.id=2\ncluster.id=c\n")  # KRaft v1
    assert read_meta_properties(tmp_path) == MetaProperties(1, 2, "c")
    text = format_meta_properties(MetaProperties(1, 2, "c")).decode()
    assert "node.id=2" in text and "broker.id" not in text


@pytest.mark.parametrize(
    "content, match",
    [
        ("version=7\n", "unknown version"),
        ("version=x\n", "unknown version"),
        ("broker.id=one\n", "not a base-10 int32"),
        ("version=1\ncluster.id=c\n", "no node.id"),
        ("broker.id=1\ndirectory.id=xyz\n", "not a Uuid"),
        ("version=0\ncluster.id=\\u12\n", r"Malformed \\uxxxx encoding in line 2"),
    ],
)
def test_unreadable_meta_properties(tmp_path, content, match):
    write(tmp_path, META_PROPERTIES, content)
    with pytest.raises(CheckpointError, match=match):
        read_meta_properties(tmp_path)


def test_check_meta_properties(tmp_path):
    assert check_meta_properties(tmp_path, 1, CLUSTER_ID) is None  # fresh dir
    shutil.copy(DATA / META_PROPERTIES, tmp_path)
    assert check_meta_properties(tmp_path, 1, CLUSTER_ID).broker_id == 1
    assert check_meta_properties(tmp_path, -1, CLUSTER_ID).broker_id == 1  # id not configured
    with pytest.raises(
        InconsistentBrokerIdError, match=r"configured broker\.id 2 differs from broker\.id 1"
    ):
        check_meta_properties(tmp_path, 2, CLUSTER_ID)
    with pytest.raises(InconsistentClusterIdError, match="wrong cluster") as err:
        check_meta_properties(tmp_path, 1, "another-cluster")
    assert str(tmp_path / META_PROPERTIES) in str(err.value)
    write(tmp_path, META_PROPERTIES, "broker.id=1\n")  # no cluster.id stored yet: fine
    assert check_meta_properties(tmp_path, 1, CLUSTER_ID).cluster_id is None


def test_check_meta_properties_needs_version_0(tmp_path):
    write(tmp_path, META_PROPERTIES, "version=1\nnode.id=1\ncluster.id=c\n")
    with pytest.raises(MetaPropertiesError, match="only supports version 0"):
        check_meta_properties(tmp_path, 1, "c")
