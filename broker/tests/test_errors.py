"""moldau.errors against the error tables of two clients written independently of it and
of each other, kafka-python's kafka.errors and librdkafka's (confluent_kafka.KafkaError):
every code Moldau answers is one they know, and is retriable exactly when Kafka's client
would retry it, so no client is told to give up on an error it could ride out, or to
retry forever one it cannot; and its name is theirs but where they name it otherwise than
Kafka's Errors enumeration, which moldau.errors follows. Then the table itself: one class
per code, each with a name and a default message, and the lookups by code."""

from __future__ import annotations

import re

import confluent_kafka
import kafka.errors as kp_errors
import pytest

from moldau import errors
from moldau.tools import kafka_errors

# Where kafka-python's flag differs from Kafka's own client, Kafka's is the one to keep:
# CorruptRecordException is a RetriableException in the Java client.
KAFKA_PYTHON_DIFFERS = {2: True}

# The codes kafka-python names otherwise than Kafka's Errors does (code -> kafka-python's
# name): older names Kafka has since changed (UNKNOWN, NOT_LEADER_FOR_PARTITION) and names
# of its own. Kafka's are the ones moldau.errors keeps.
KAFKA_PYTHON_NAMES = {-1: "UNKNOWN", 6: "NOT_LEADER_FOR_PARTITION",
                      10: "MESSAGE_SIZE_TOO_LARGE", 17: "INVALID_TOPIC",
                      39: "INVALID_REPLICATION_ASSIGNMENT"}

# The same for librdkafka, which shortens some of Kafka's names (CORRUPT_MESSAGE is its
# INVALID_MSG; kafka-python agrees with Kafka there).
LIBRDKAFKA_NAMES = {-1: "UNKNOWN", 2: "INVALID_MSG", 3: "UNKNOWN_TOPIC_OR_PART",
                    4: "INVALID_MSG_SIZE", 6: "NOT_LEADER_FOR_PARTITION",
                    10: "MSG_SIZE_TOO_LARGE", 11: "STALE_CTRL_EPOCH", 17: "TOPIC_EXCEPTION"}
# Codes librdkafka's table leaves out: TRANSACTIONAL_ID_NOT_FOUND (105) is only answered to
# DescribeTransactions, BROKER_ID_NOT_REGISTERED (102) and INELIGIBLE_REPLICA (107) only to
# the controller's AllocateProducerIds and AlterPartition: librdkafka sends none of them.
LIBRDKAFKA_MISSING = {102, 105, 107}


def moldau_errors() -> dict[int, type[errors.KafkaError]]:
    found: dict[int, type[errors.KafkaError]] = {}
    for value in vars(errors).values():
        if isinstance(value, type) and issubclass(value, errors.KafkaError) \
                and value is not errors.KafkaError:
            assert value.code not in found, (value, found.get(value.code))  # one per code
            found[value.code] = value
    return found


def kafka_python_errors() -> dict[int, type[kp_errors.BrokerResponseError]]:
    return {cls.errno: cls for cls in vars(kp_errors).values()
            if isinstance(cls, type) and issubclass(cls, kp_errors.BrokerResponseError)
            and cls.errno is not None}


def librdkafka_names() -> dict[int, str]:
    return {v: k for k, v in vars(confluent_kafka.KafkaError).items()
            if isinstance(v, int) and not k.startswith("_")}


def test_every_code_is_known_to_kafka_python_with_kafkas_retriability() -> None:
    theirs = kafka_python_errors()
    for code, ours in moldau_errors().items():
        assert code in theirs, f"{ours.__name__}: code {code} is not one of Kafka's"
        expected = KAFKA_PYTHON_DIFFERS.get(code, theirs[code].retriable)
        assert ours.retriable == expected, (ours.__name__, theirs[code].message)


def test_every_code_is_known_to_librdkafka() -> None:
    codes = librdkafka_names()
    unknown = {c.__name__: code for code, c in moldau_errors().items()
               if code not in codes and code not in LIBRDKAFKA_MISSING}
    assert unknown == {}


def test_names_are_kafka_pythons_but_where_it_names_a_code_otherwise() -> None:
    theirs = kafka_python_errors()
    differ = {code: theirs[code].message for code, ours in moldau_errors().items()
              if theirs[code].message != ours.name}
    assert differ == KAFKA_PYTHON_NAMES


def test_names_are_librdkafkas_but_where_it_names_a_code_otherwise() -> None:
    theirs = librdkafka_names()
    differ = {code: theirs[code] for code, ours in moldau_errors().items()
              if code not in LIBRDKAFKA_MISSING and theirs[code] != ours.name}
    assert differ == LIBRDKAFKA_NAMES


def test_every_error_has_a_name_and_a_default_message_and_codes_and_names_are_unique() -> None:
    table: list[type[errors.KafkaError]] = [errors.KafkaError, *moldau_errors().values()]
    for cls in table:
        assert re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*", cls.name), cls.__name__
        assert cls.default_message.strip() == cls.default_message != "", cls.__name__
        # a class with a code of its own declares its name and message with it
        if cls.code != errors.KafkaError.code:
            assert {"code", "name", "default_message"} <= set(vars(cls)), cls.__name__
        assert errors.error_for(cls.code).name == cls.name
    declared = [cls for cls in table if "code" in vars(cls)]
    assert len({cls.code for cls in declared}) == len(declared)
    assert len({cls.name for cls in declared}) == len(declared)
    assert len({cls.code for cls in table}) == len(table) - 1  # UnknownServerError: -1 too


def test_unknown_server_error_is_kafka_error_by_name() -> None:
    assert errors.KafkaError.name == errors.UnknownServerError.name == "UNKNOWN_SERVER_ERROR"
    assert errors.UnknownServerError.code == -1
    assert errors.KafkaError.default_message == (
        "The server experienced an unexpected error when processing the request.")


def test_lookups_by_code() -> None:
    assert errors.error_for(3) is errors.UnknownTopicOrPartitionError
    assert errors.error_for(-1) is errors.KafkaError
    assert errors.error_for(9999) is errors.KafkaError  # as Kafka's Errors.forCode
    assert errors.error_name(3) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert errors.error_name(2) == "CORRUPT_MESSAGE"
    assert errors.error_name(-1) == "UNKNOWN_SERVER_ERROR"
    assert errors.error_name(0) == "NONE"
    assert errors.error_name(9999) == "ERROR_9999"
    assert errors.error_name(-2) == "ERROR_-2"
    assert errors.default_message(3) == "This server does not host this topic-partition."
    assert errors.default_message(0) is None
    assert errors.default_message(9999) is None


def test_the_default_message_is_not_the_message_of_a_raised_error() -> None:
    assert str(errors.UnknownTopicOrPartitionError()) == ""
    assert str(errors.UnknownTopicOrPartitionError("no such topic")) == "no such topic"
    assert str(errors.KafkaError()) == ""


def test_a_code_is_declared_once_and_with_its_name_and_message() -> None:
    with pytest.raises(TypeError, match="code 3 is UnknownTopicOrPartitionError's"):
        class Again(errors.KafkaError, code=3, name="AGAIN", message="Again."): ...
    with pytest.raises(TypeError, match="needs Kafka's name and message"):
        class NoMessage(errors.KafkaError, code=9998, name="NO_MESSAGE"): ...
    with pytest.raises(TypeError, match="go with a code"):
        class NoCode(errors.KafkaError, name="NO_CODE", message="No code."): ...
    assert errors.error_for(9998) is errors.KafkaError


def test_tools_print_the_brokers_message_else_kafkas_default() -> None:
    assert kafka_errors.error_text(3) == "This server does not host this topic-partition."
    assert kafka_errors.error_text(3, "Topic 'x' does not exist.") == "Topic 'x' does not exist."
    assert kafka_errors.error_text(3, "") == "This server does not host this topic-partition."
    assert kafka_errors.error_text(9999) == "Kafka error code 9999."
    assert kafka_errors.error_name(9999) == "ERROR_9999"
    error = kafka_errors.KafkaToolError(36)
    assert (error.code, error.name, str(error)) == (
        36, "TOPIC_ALREADY_EXISTS", "Topic with this name already exists.")
