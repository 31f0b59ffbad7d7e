"""ApiKey, generated next to APIS: one member per API, named as Kafka's ApiKeys enum."""

from __future__ import annotations

import pytest

from moldau.protocol.generated.api import APIS, ApiKey


def test_every_api_has_a_member_with_its_number() -> None:
    assert {int(key) for key in ApiKey} == set(APIS)
    assert len(ApiKey.__members__) == len(APIS)  # no aliases: each number has one name
    for key, spec in APIS.items():
        member = ApiKey(key)
        assert member == spec.key
        # the UPPER_SNAKE name spells the request's name: OFFSET_FOR_LEADER_EPOCH
        assert member.name.replace("_", "") == spec.name.upper()
        assert member.name.isupper() and not member.name.startswith("_")


@pytest.mark.parametrize(("member", "number"), [
    ("PRODUCE", 0),
    ("FETCH", 1),
    ("LIST_OFFSETS", 2),
    ("METADATA", 3),
    ("LEADER_AND_ISR", 4),
    ("CONTROLLED_SHUTDOWN", 7),
    ("SASL_HANDSHAKE", 17),
    ("API_VERSIONS", 18),
    ("CREATE_TOPICS", 19),
    ("INIT_PRODUCER_ID", 22),
    ("OFFSET_FOR_LEADER_EPOCH", 23),
    ("ADD_PARTITIONS_TO_TXN", 24),
    ("DESCRIBE_USER_SCRAM_CREDENTIALS", 50),
    ("DESCRIBE_CLUSTER", 60),
    ("READ_SHARE_GROUP_STATE_SUMMARY", 87),
])
def test_names_are_kafkas(member: str, number: int) -> None:
    assert ApiKey[member] == number


def test_members_work_as_the_ints_they_replace() -> None:
    assert APIS[ApiKey.API_VERSIONS].name == "ApiVersions"
    assert {0: "produce"}[ApiKey.PRODUCE] == "produce"
    assert APIS[ApiKey.FETCH].request.API_KEY == ApiKey.FETCH
    assert f"{ApiKey.METADATA}" == "3"  # logs and labels show the number, as before
