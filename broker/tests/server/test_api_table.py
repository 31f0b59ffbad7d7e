"""The API table (server/api_table.py) is complete: every API key the broker advertises
has an entry naming the handler that serves it, what it authorizes, its quota class and
whether it may come before authentication; and nothing else is in it."""

from __future__ import annotations

from dataclasses import fields

from moldau.errors import (
    ClusterAuthorizationFailedError,
    DelegationTokenAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from moldau.protocol.generated.api import ApiKey
from moldau.server.api_table import API_TABLE, BEFORE_AUTHENTICATION, Scope
from moldau.server.handlers import build_handlers
from moldau.server.quotas import Quota
from moldau.server.requests import RequestDispatcher

from .test_handler_ports import fake_services

RESOURCES = {"TOPIC": TopicAuthorizationFailedError.code,
             "GROUP": GroupAuthorizationFailedError.code,
             "CLUSTER": ClusterAuthorizationFailedError.code,
             "TRANSACTIONAL_ID": TransactionalIdAuthorizationFailedError.code,
             "USER": DelegationTokenAuthorizationFailedError.code,
             "DELEGATION_TOKEN": 0}  # only filters what DescribeDelegationToken lists
# APIs Kafka decides without an ACL: the SASL exchange, renewing or expiring a token (its
# owner or a renewer may), and what a ZooKeeper broker refuses before authorizing: an
# Envelope (closes the connection) and the new consumer protocol's APIs (35)
NO_ACL = {ApiKey.RENEW_DELEGATION_TOKEN, ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.ENVELOPE,
          ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE}
# Kafka's AclOperation names
OPERATIONS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
              "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS",
              "DESCRIBE_TOKENS"}
INTER_BROKER = {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION,
                ApiKey.ALLOCATE_PRODUCER_IDS}
# where Kafka 3.9 answers a denial with another resource's error: a follower's Fetch
# without CLUSTER_ACTION gets 29 in every partition; an idempotent producer with WRITE on
# no topic (and no IDEMPOTENT_WRITE) gets 31
OTHER_ERROR = {(ApiKey.FETCH, "CLUSTER", "CLUSTER_ACTION"): TopicAuthorizationFailedError.code,
               (ApiKey.INIT_PRODUCER_ID, "TOPIC", "WRITE"): ClusterAuthorizationFailedError.code}


def test_every_advertised_api_has_an_entry_and_no_entry_is_unserved() -> None:
    built, _ = build_handlers(fake_services())
    assert set(API_TABLE) == set(built)
    for key, handler in built.items():
        assert type(handler) is API_TABLE[key].handler, key.name


def test_the_dispatcher_serves_the_tables_versions() -> None:
    from moldau.server.routes import register_handlers

    dispatcher = RequestDispatcher()
    register_handlers(dispatcher, fake_services())
    assert dispatcher.advertised_versions() == {
        key: entry.versions for key, entry in API_TABLE.items()}


def test_every_entry_is_complete() -> None:
    for key, entry in API_TABLE.items():
        for field in fields(entry):
            assert getattr(entry, field.name) is not None, (key.name, field.name)
        if key not in BEFORE_AUTHENTICATION | NO_ACL:
            assert entry.checks, f"{key.name} authorizes nothing"
        for index, check in enumerate(entry.checks):
            assert check.resource in RESOURCES, (key.name, check)
            assert check.operation in OPERATIONS, (key.name, check)
            assert isinstance(check.scope, Scope)
            if check.scope in (Scope.FILTER, Scope.FALLBACK):
                assert check.denied == 0, (key.name, check)  # no error by itself
            else:
                expected = OTHER_ERROR.get((key, check.resource, check.operation),
                                           RESOURCES[check.resource])
                assert check.denied == expected, (key.name, check)
            if check.scope is Scope.FALLBACK:  # something else decides after it
                assert index + 1 < len(entry.checks), (key.name, check)


def test_only_the_handshake_apis_come_before_authentication() -> None:
    early = {key for key, entry in API_TABLE.items() if entry.before_authentication}
    assert early == BEFORE_AUTHENTICATION == {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                                              ApiKey.SASL_AUTHENTICATE}


def test_quota_classes_follow_kafka() -> None:
    exempt = {key for key, entry in API_TABLE.items() if entry.quota is Quota.EXEMPT}
    # WriteTxnMarkers is a cluster action too (a coordinator's, or an operator's abort), and
    # so is Envelope (Kafka's ApiKeys marks both clusterAction)
    assert exempt == INTER_BROKER | {ApiKey.WRITE_TXN_MARKERS, ApiKey.ENVELOPE}
    mutations = {key for key, entry in API_TABLE.items()
                 if entry.quota is Quota.CONTROLLER_MUTATION}
    assert mutations == {ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS}
    for key in INTER_BROKER:
        assert [(c.resource, c.operation) for c in API_TABLE[key].checks] == [
            ("CLUSTER", "CLUSTER_ACTION")]
