"""Topic names are refused with Kafka 3.9.1's messages (Topic.validate): the reference
lab's java-client.admin scenario compares what CreateTopics answers a bad name."""

from __future__ import annotations

import pytest

from moldau.errors import InvalidTopicError
from moldau.server.topic_names import validate_topic_name


@pytest.mark.parametrize(("name", "message"), [
    ("", "Topic name is invalid: the empty string is not allowed"),
    (".", "Topic name is invalid: '.' is not allowed"),
    ("..", "Topic name is invalid: '..' is not allowed"),
    ("x" * 250, f"Topic name is invalid: the length of '{'x' * 250}' is longer than the max "
                "allowed length 249"),
    ("bad/name", "Topic name is invalid: 'bad/name' contains one or more characters other "
                 "than ASCII alphanumerics, '.', '_' and '-'"),
])
def test_a_bad_name_gets_kafkas_message(name: str, message: str) -> None:
    with pytest.raises(InvalidTopicError) as refused:
        validate_topic_name(name)
    assert str(refused.value) == message


def test_a_good_name_passes() -> None:
    validate_topic_name("orders.v2_eu-1" + "x" * 235)  # 249 characters
