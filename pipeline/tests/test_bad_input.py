"""Bad input through Spark: a clear error when the read is loaded or the write starts,
before any query runs, and nothing created or written on the cluster."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient
from kafka_helpers import create_topic, produce, read_all, topic_name

import moldau_spark


@pytest.fixture(scope="module")
def topic(broker) -> str:
    name = topic_name("bad")
    create_topic(broker.bootstrap, name, 2)
    produce(broker.bootstrap, name, [(0, None, b"a"), (1, None, b"b")])
    return name


def readers(spark, broker):
    for reader in (spark.read, spark.readStream):
        yield reader.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "{topic}", "startingOffset": "earliest"},
     "unknown source option(s) 'startingoffset'"),
    ({"subscribe": "{topic}", "startingOffsets": '{"{topic}": {"0": 1, }'},
     "option startingOffsets is not valid JSON"),
    ({"subscribe": "{topic}", "startingOffsets": '{"{topic}": {"0": 0}}'},
     "must give every partition the query reads; missing: {topic}-1"),
    ({"subscribe": "no-such-topic"}, "topic(s) no-such-topic do not exist on the cluster"),
    ({"assign": '{"{topic}": [0, 7]}'}, "assigned partition(s) {topic}-7 do not exist"),
])
def test_bad_read_fails_before_the_query(spark, broker, topic, options, message) -> None:
    for reader in readers(spark, broker):
        for key, value in options.items():
            reader = reader.option(key, value.replace("{topic}", topic))
        with pytest.raises(Exception) as info:
            reader.load()  # Spark asks the source for its schema here
        assert message.replace("{topic}", topic) in str(info.value)
    names = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    assert "no-such-topic" not in names  # looking did not create it


def test_bad_write_fails_and_writes_nothing(spark, broker, topic) -> None:
    out = topic_name("bad-out")
    create_topic(broker.bootstrap, out, 1)
    df = spark.createDataFrame([("k", "v")], "key string, value string")

    def write(frame, **options: str) -> str:
        writer = frame.write.format("moldau").mode("append").option(
            "kafka.bootstrap.servers", broker.bootstrap)
        for key, value in options.items():
            writer = writer.option(key, value)
        moldau_spark.activate(spark)
        with pytest.raises(Exception) as info:
            writer.save()
        return str(info.value)

    assert "unknown sink option(s) 'topics'" in write(df, topics=out)
    assert "no topic: give the option topic or a 'topic' column" in write(df)
    assert "has no 'value' column" in write(df.drop("value"), topic=out)
    assert "column 'partition' is string, expected int" in write(
        df.selectExpr("value", "'x' as partition"), topic=out)
    assert read_all(broker.bootstrap, out) == []
