"""moldau.errors against the error tables of two clients written independently of it and
of each other, kafka-python's kafka.errors and librdkafka's (confluent_kafka.KafkaError):
every code Moldau answers is one they know, and is retriable exactly when Kafka's client
would retry it, so no client is told to give up on an error it could ride out, or to
retry forever one it cannot."""

from __future__ import annotations

import confluent_kafka
import kafka.errors as kp_errors

from moldau import errors

# Where kafka-python's flag differs from Kafka's own client, Kafka's is the one to keep:
# CorruptRecordException is a RetriableException in the Java client.
KAFKA_PYTHON_DIFFERS = {2: True}


def moldau_errors() -> dict[int, type[errors.KafkaError]]:
    found: dict[int, type[errors.KafkaError]] = {}
    for value in vars(errors).values():
        if isinstance(value, type) and issubclass(value, errors.KafkaError) \
                and value is not errors.KafkaError:
            assert value.code not in found, (value, found.get(value.code))  # one per code
            found[value.code] = value
    return found


def test_every_code_is_known_to_kafka_python_with_kafkas_retriability() -> None:
    theirs = {cls.errno: cls for cls in vars(kp_errors).values()
              if isinstance(cls, type) and issubclass(cls, kp_errors.BrokerResponseError)
              and cls.errno is not None}
    for code, ours in moldau_errors().items():
        assert code in theirs, f"{ours.__name__}: code {code} is not one of Kafka's"
        expected = KAFKA_PYTHON_DIFFERS.get(code, theirs[code].retriable)
        assert ours.retriable == expected, (ours.__name__, theirs[code].message)


def test_every_code_is_known_to_librdkafka() -> None:
    codes = {v for k, v in vars(confluent_kafka.KafkaError).items()
             if isinstance(v, int) and not k.startswith("_")}
    unknown = {c.__name__: code for code, c in moldau_errors().items() if code not in codes}
    assert unknown == {}
