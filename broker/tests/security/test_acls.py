"""Kafka's ACL model (moldau.security.acls): enums and their spellings, filters, creation
checks, the znode codec against payloads as Kafka writes them, and the decision rules of
Kafka 3.9's AclAuthorizer."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.security.acls import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclPolicy,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    acl_paths,
    acl_znode_path,
    allowing_operations,
    decode_acl_change,
    decode_acls,
    encode_acl_change,
    encode_acls,
    java_host_address,
    operations_bitfield,
    parse_super_users,
    supported_operations,
    validate_for_create,
)

Op, Perm, RT, PT = AclOperation, AclPermissionType, ResourceType, PatternType
ALLOW, DENY = Perm.ALLOW, Perm.DENY


def entry(principal: str = "User:alice", operation: AclOperation = Op.READ,
          permission: AclPermissionType = ALLOW, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, permission)


def topic(name: str, pattern_type: PatternType = PT.LITERAL) -> ResourcePattern:
    return ResourcePattern(RT.TOPIC, name, pattern_type)


# -- enums -------------------------------------------------------------------------------------

def test_wire_codes_are_kafkas() -> None:
    assert [(m.name, m.value) for m in RT] == [
        ("UNKNOWN", 0), ("ANY", 1), ("TOPIC", 2), ("GROUP", 3), ("CLUSTER", 4),
        ("TRANSACTIONAL_ID", 5), ("DELEGATION_TOKEN", 6), ("USER", 7)]
    assert [(m.name, m.value) for m in PT] == [
        ("UNKNOWN", 0), ("ANY", 1), ("MATCH", 2), ("LITERAL", 3), ("PREFIXED", 4)]
    assert [m.value for m in Op] == list(range(15))
    assert (Op.CLUSTER_ACTION, Op.IDEMPOTENT_WRITE, Op.DESCRIBE_TOKENS) == (9, 12, 14)
    assert [(m.name, m.value) for m in Perm] == [
        ("UNKNOWN", 0), ("ANY", 1), ("DENY", 2), ("ALLOW", 3)]
    assert RT.from_code(42) is RT.UNKNOWN and Op.from_code(3) is Op.READ


@pytest.mark.parametrize("text", ["ClusterAction", "CLUSTER_ACTION", "cluster-action",
                                  "clusterAction", " ClusterAction "])
def test_names_parse_in_every_kafka_spelling(text: str) -> None:
    assert Op.parse(text) is Op.CLUSTER_ACTION


def test_pascal_names_are_those_of_zookeeper() -> None:
    assert RT.TRANSACTIONAL_ID.pascal_name == "TransactionalId"
    assert RT.DELEGATION_TOKEN.pascal_name == "DelegationToken"
    assert Op.DESCRIBE_CONFIGS.pascal_name == "DescribeConfigs"
    assert RT.parse("TransactionalId") is RT.TRANSACTIONAL_ID
    assert PT.parse("prefixed") is PT.PREFIXED and Perm.parse("Deny") is DENY


def test_a_bad_name_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"unknown operation 'Reed'; expected one of .*Read"):
        Op.parse("Reed")
    with pytest.raises(ValueError, match="unknown resource type 'Topics'"):
        RT.parse("Topics")


# -- principals and hosts ---------------------------------------------------------------------

def test_super_users_parse_as_kafka_writes_them() -> None:
    assert parse_super_users("User:admin; User:CN=broker1,O=x ;") == {
        "User:admin", "User:CN=broker1,O=x"}
    assert parse_super_users("") == frozenset() and parse_super_users(None) == frozenset()
    with pytest.raises(ValueError, match="principalType:principalName but got admin"):
        parse_super_users("User:a;admin")


@pytest.mark.parametrize(("address", "java"), [
    ("10.0.0.1", "10.0.0.1"),
    ("::1", "0:0:0:0:0:0:0:1"),
    ("fe80::1:2%eth0", "fe80:0:0:0:0:0:1:2%eth0"),
    ("2001:DB8::0A", "2001:db8:0:0:0:0:0:a"),
    ("::ffff:192.0.2.7", "192.0.2.7"),
    ("not-an-ip", "not-an-ip"),
])
def test_hosts_print_as_java_does(address: str, java: str) -> None:
    assert java_host_address(address) == java


# -- patterns, entries and filters -----------------------------------------------------------

def test_str_forms_are_kafka_acls_output() -> None:
    binding = AclBinding(topic("orders"), entry())
    assert str(binding.pattern) == (
        "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)")
    assert str(binding.entry) == (
        "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)")


PATTERNS = [topic("orders"), topic("*"), topic("ord", PT.PREFIXED), topic("orders", PT.PREFIXED),
            topic("x", PT.PREFIXED), ResourcePattern(RT.GROUP, "orders", PT.LITERAL)]


@pytest.mark.parametrize(("pattern_filter", "expected"), [
    (ResourcePatternFilter(), PATTERNS),
    (ResourcePatternFilter(RT.TOPIC, "orders", PT.LITERAL), [topic("orders")]),
    (ResourcePatternFilter(RT.TOPIC, "orders", PT.PREFIXED), [topic("orders", PT.PREFIXED)]),
    (ResourcePatternFilter(RT.TOPIC, "orders", PT.ANY),
     [topic("orders"), topic("orders", PT.PREFIXED)]),
    (ResourcePatternFilter(RT.ANY, "orders", PT.ANY),
     [topic("orders"), topic("orders", PT.PREFIXED), PATTERNS[5]]),
    # MATCH: everything that applies to the name: itself, the literal *, its prefixes
    (ResourcePatternFilter(RT.TOPIC, "orders", PT.MATCH),
     [topic("orders"), topic("*"), topic("ord", PT.PREFIXED), topic("orders", PT.PREFIXED)]),
    (ResourcePatternFilter(RT.TOPIC, None, PT.MATCH), PATTERNS[:5]),
    (ResourcePatternFilter(RT.TOPIC, None, PT.PREFIXED), PATTERNS[2:5]),
])
def test_resource_pattern_filters_match_as_kafka(pattern_filter: ResourcePatternFilter,
                                                 expected: list[ResourcePattern]) -> None:
    assert [p for p in PATTERNS if pattern_filter.matches(p)] == expected


def test_filters_that_match_at_most_one_name_their_patterns() -> None:
    assert ResourcePatternFilter(RT.TOPIC, "t", PT.ANY).exact_patterns() == (
        topic("t"), topic("t", PT.PREFIXED))
    assert ResourcePatternFilter(RT.TOPIC, "t", PT.PREFIXED).exact_patterns() == (
        topic("t", PT.PREFIXED),)
    assert ResourcePatternFilter(RT.TOPIC, "t", PT.MATCH).indefinite_field() == (
        "Resource pattern type is MATCH.")
    assert ResourcePatternFilter(RT.ANY, "t", PT.LITERAL).exact_patterns() == ()
    assert ResourcePatternFilter(RT.TOPIC, None, PT.LITERAL).indefinite_field() == (
        "Resource name is NULL.")


def test_entry_filters_match_as_kafka() -> None:
    alice_read = entry()
    wildcard = entry("User:*", host="10.0.0.1")
    assert AccessControlEntryFilter().matches(alice_read)
    assert AccessControlEntryFilter("User:alice", "*", Op.READ, ALLOW).matches(alice_read)
    assert not AccessControlEntryFilter(operation=Op.WRITE).matches(alice_read)
    assert not AccessControlEntryFilter(permission=DENY).matches(alice_read)
    # no wildcard expansion in filters: User:* selects the entries stored for User:*
    assert not AccessControlEntryFilter("User:*").matches(alice_read)
    assert AccessControlEntryFilter("User:*", "10.0.0.1").matches(wildcard)
    assert not AccessControlEntryFilter(host="*").matches(wildcard)
    binding_filter = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "orders-1", PT.MATCH),
                                      AccessControlEntryFilter(operation=Op.READ))
    assert binding_filter.matches(AclBinding(topic("orders-", PT.PREFIXED), alice_read))
    assert not binding_filter.matches(AclBinding(topic("orders-2"), alice_read))
    assert AclBindingFilter(entry_filter=AccessControlEntryFilter(operation=Op.UNKNOWN)
                            ).is_unknown


# -- creation checks ---------------------------------------------------------------------------

@pytest.mark.parametrize(("binding", "reason"), [
    (AclBinding(topic("orders"), entry()), None),
    (AclBinding(ResourcePattern(RT.CLUSTER, "kafka-cluster", PT.LITERAL), entry()), None),
    (AclBinding(topic("a/b"), entry()), "Failed to create ACL"),
    (AclBinding(topic(""), entry()), "Invalid empty resource name"),
    (AclBinding(ResourcePattern(RT.CLUSTER, "c1", PT.LITERAL), entry()),
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    (AclBinding(ResourcePattern(RT.ANY, "t", PT.LITERAL), entry()), "Failed to create ACL"),
    (AclBinding(ResourcePattern(RT.UNKNOWN, "t", PT.LITERAL), entry()), "Failed to create ACL"),
    (AclBinding(topic("t", PT.MATCH), entry()), "Failed to create ACL"),
    (AclBinding(topic("t"), entry(operation=Op.ANY)), "Failed to create ACL"),
    (AclBinding(topic("t"), entry(operation=Op.UNKNOWN)), "Failed to create ACL"),
    (AclBinding(topic("t"), entry(permission=Perm.ANY)), "Failed to create ACL"),
    (AclBinding(topic("t"), entry(principal="alice")),
     "expected a string in format principalType:principalName but got alice"),
])
def test_creation_is_refused_with_kafkas_message(binding: AclBinding,
                                                 reason: str | None) -> None:
    assert validate_for_create(binding) == reason


# -- operations per resource type -------------------------------------------------------------

def test_supported_operations_and_their_bitfield() -> None:
    assert supported_operations(RT.GROUP) == {Op.READ, Op.DESCRIBE, Op.DELETE}
    assert supported_operations(RT.USER) == {Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS}
    # bits 3 (READ), 6 (DELETE) and 8 (DESCRIBE)
    assert operations_bitfield(supported_operations(RT.GROUP)) == 0b1_0100_1000
    with pytest.raises(ValueError, match="ANY is not a concrete resource type"):
        supported_operations(RT.ANY)
    assert allowing_operations(Op.DESCRIBE) == {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE,
                                                Op.ALTER, Op.ALL}
    assert allowing_operations(Op.WRITE) == {Op.WRITE, Op.ALL}


# -- the znode codec -------------------------------------------------------------------------

# /kafka-acl/Topic/orders as Kafka 3.9 writes it (its AclEntry's HashMaps through Jackson)
# (Kafka's entry order is its set's; this encoder sorts by principal)
KAFKA_39_ZNODE = (b'{"acls":[{"principal":"User:*","permissionType":"Deny","host":"10.0.0.1",'
                  b'"operation":"DescribeConfigs"},{"principal":"User:alice",'
                  b'"permissionType":"Allow","host":"*","operation":"Read"}],"version":1}')
# the form of Kafka's own documentation (ZkData's comment), older writers' key order
KAFKA_DOC_ZNODE = (b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Allow",'
                   b'"operation": "Read","principal": "User:alice"}]}')


def test_znode_data_is_byte_for_byte_kafkas() -> None:
    entries = {entry(), entry("User:*", Op.DESCRIBE_CONFIGS, DENY, "10.0.0.1")}
    assert encode_acls(entries) == KAFKA_39_ZNODE
    assert decode_acls(KAFKA_39_ZNODE) == entries
    assert decode_acls(KAFKA_DOC_ZNODE) == {entry(host="host1")}


def test_znode_data_round_trips_and_reads_upper_case() -> None:
    entries = {entry(op_principal, operation, permission, host)
               for op_principal in ("User:a", "Group:g:with:colons")
               for operation in (Op.ALL, Op.IDEMPOTENT_WRITE, Op.CLUSTER_ACTION)
               for permission in (ALLOW, DENY) for host in ("*", "0:0:0:0:0:0:0:1")}
    assert decode_acls(encode_acls(entries)) == entries
    upper = json.dumps({"version": 1, "acls": [
        {"principal": "User:bob", "permissionType": "DENY", "operation": "ALTER_CONFIGS",
         "host": "*"}]}).encode()
    assert decode_acls(upper) == {entry("User:bob", Op.ALTER_CONFIGS, DENY)}
    assert decode_acls(b"") == set() and decode_acls(None) == set()


NAMES = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
ENTRIES = st.builds(AccessControlEntry,
                    st.builds(lambda kind, name: f"{kind}:{name}", NAMES, NAMES), NAMES,
                    st.sampled_from([op for op in Op if op > Op.ANY]),
                    st.sampled_from([ALLOW, DENY]))


@given(st.sets(ENTRIES, max_size=8), NAMES,
       st.sampled_from([RT.TOPIC, RT.GROUP, RT.TRANSACTIONAL_ID, RT.USER]),
       st.sampled_from([PT.LITERAL, PT.PREFIXED]))
def test_codec_round_trips(entries: set[AccessControlEntry], name: str, resource_type: RT,
                           pattern_type: PT) -> None:
    assert decode_acls(encode_acls(entries)) == entries
    pattern = ResourcePattern(resource_type, name, pattern_type)
    root = "/kafka-acl-changes" if pattern_type is PT.LITERAL else "/kafka-acl-extended-changes"
    assert decode_acl_change(root, encode_acl_change(pattern)) == pattern


def test_an_operation_kafka_does_not_know_reads_as_unknown() -> None:
    data = b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow",' \
           b'"operation":"Teleport","host":"*"}]}'
    assert decode_acls(data) == {entry("User:a", Op.UNKNOWN)}


@pytest.mark.parametrize(("data", "message"), [
    (b'{"version":2,"acls":[]}', "has version 2; this broker reads version 1 only"),
    (b'{"acls":[]}', "has version None"),
    (b"not json", "is not JSON"),
    (b'{"version":1,"acls":[{"principal":"User:a","host":"*","operation":"Read"}]}',
     "lacks 'permissionType'"),
    (b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","host":"*",'
     b'"operation":"Read"}]}', "principalType:principalName but got alice"),
])
def test_bad_znode_data_is_refused_clearly(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_acls(data)


def test_znode_paths_are_kafkas() -> None:
    assert acl_znode_path(topic("orders")) == "/kafka-acl/Topic/orders"
    assert acl_znode_path(topic("orders-", PT.PREFIXED)) == (
        "/kafka-acl-extended/prefixed/Topic/orders-")
    assert acl_znode_path(ResourcePattern(RT.TRANSACTIONAL_ID, "*", PT.LITERAL)) == (
        "/kafka-acl/TransactionalId/*")
    with pytest.raises(ValueError, match="not stored under pattern type MATCH"):
        acl_znode_path(topic("x", PT.MATCH))
    paths = acl_paths()
    assert paths[:4] == ["/kafka-acl", "/kafka-acl-changes", "/kafka-acl-extended/prefixed",
                         "/kafka-acl-extended-changes"]
    assert "/kafka-acl/DelegationToken" in paths
    assert "/kafka-acl-extended/prefixed/User" in paths and len(paths) == 4 + 2 * 6


def test_change_notifications_are_kafkas() -> None:
    assert encode_acl_change(topic("orders")) == b"TOPIC:orders"
    assert encode_acl_change(ResourcePattern(RT.CLUSTER, "kafka-cluster", PT.LITERAL)) == (
        b"CLUSTER:kafka-cluster")
    assert encode_acl_change(topic("orders-", PT.PREFIXED)) == (
        b'{"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}')
    tx = ResourcePattern(RT.TRANSACTIONAL_ID, "tx:1", PT.LITERAL)
    assert decode_acl_change("/kafka-acl-changes", encode_acl_change(tx)) == tx
    assert decode_acl_change("/kafka-acl-extended-changes", encode_acl_change(
        topic("orders-", PT.PREFIXED))) == topic("orders-", PT.PREFIXED)
    with pytest.raises(ValueError, match="format ResourceType:ResourceName but got orders"):
        decode_acl_change("/kafka-acl-changes", b"orders")
    with pytest.raises(ValueError, match="version 2"):
        decode_acl_change("/kafka-acl-extended-changes",
                          b'{"version":2,"resourceType":"TOPIC","name":"a",'
                          b'"patternType":"PREFIXED"}')


# -- the decision ---------------------------------------------------------------------------------

Acls = dict[ResourcePattern, set[AccessControlEntry]]


def decide(acls: Acls, operation: AclOperation = Op.READ, name: str = "orders-eu",
           principal: str = "User:alice", host: str = "10.0.0.1",
           policy: AclPolicy | None = None) -> bool:
    """The decision for one topic; the applying ACL sets are picked with a MATCH filter."""
    match = ResourcePatternFilter(RT.TOPIC, name, PT.MATCH)
    acl_sets = [entries for pattern, entries in acls.items() if match.matches(pattern)]
    return (policy or AclPolicy()).authorize(acl_sets, principal, host, operation)


LITERAL, WILDCARD, PREFIX = topic("orders-eu"), topic("*"), topic("orders-", PT.PREFIXED)


def test_no_acl_on_the_resource_follows_allow_everyone() -> None:
    assert not decide({})
    assert decide({}, policy=AclPolicy(allow_everyone_if_no_acl_found=True))
    # an ACL for anyone else closes the resource to everybody it does not allow
    bob = {LITERAL: {entry("User:bob")}}
    assert not decide(bob, policy=AclPolicy(allow_everyone_if_no_acl_found=True))
    # ACLs on other resources do not count
    assert decide({topic("other"): {entry("User:bob")}},
                  policy=AclPolicy(allow_everyone_if_no_acl_found=True))


def test_super_users_bypass_every_acl() -> None:
    deny_all = {WILDCARD: {entry("User:*", Op.ALL, DENY)}}
    policy = AclPolicy(super_users=frozenset({"User:admin"}))
    assert decide(deny_all, principal="User:admin", policy=policy)
    assert not decide(deny_all, principal="User:alice", policy=policy)
    assert not decide(deny_all, principal="Group:admin", policy=policy)


@pytest.mark.parametrize(("acl", "allowed"), [
    (entry(), True),
    (entry("User:*"), True),                 # wildcard principal
    (entry("Group:*"), False),               # only User:* is the wildcard
    (entry("User:bob"), False),
    (entry(host="10.0.0.1"), True),
    (entry(host="10.0.0.2"), False),
    (entry(host="10.0.0.0/24"), False),      # no CIDR: hosts compare as strings
    (entry(operation=Op.ALL), True),
    (entry(operation=Op.WRITE), False),
])
def test_allow_entries_match_principal_host_and_operation(acl: AccessControlEntry,
                                                          allowed: bool) -> None:
    assert decide({LITERAL: {acl}}) is allowed


@pytest.mark.parametrize("pattern", [LITERAL, WILDCARD, PREFIX])
def test_allow_applies_from_literal_wildcard_and_prefix(pattern: ResourcePattern) -> None:
    assert decide({pattern: {entry()}})


def test_a_prefix_is_a_plain_case_sensitive_string_prefix() -> None:
    acls: Acls = {PREFIX: {entry()}}
    assert decide(acls, name="orders-")
    assert not decide(acls, name="orders")
    assert not decide(acls, name="Orders-eu")


@pytest.mark.parametrize(("allow_at", "deny_at"), [
    (LITERAL, WILDCARD), (LITERAL, PREFIX), (PREFIX, LITERAL), (WILDCARD, PREFIX),
    (LITERAL, LITERAL),
])
def test_deny_wins_across_literal_wildcard_and_prefixed(allow_at: ResourcePattern,
                                                        deny_at: ResourcePattern) -> None:
    acls: Acls = {allow_at: {entry()}}
    acls.setdefault(deny_at, set()).add(entry("User:*", permission=DENY))
    assert not decide(acls)
    # a DENY of another operation, principal or host leaves the ALLOW standing
    acls[deny_at] = {entry("User:*", Op.WRITE, DENY), entry("User:bob", permission=DENY),
                     entry(host="10.9.9.9", permission=DENY)} | (
        {entry()} if deny_at == allow_at else set())
    assert decide(acls)


@pytest.mark.parametrize(("granted", "asked", "allowed"), [
    (Op.READ, Op.DESCRIBE, True),
    (Op.WRITE, Op.DESCRIBE, True),
    (Op.DELETE, Op.DESCRIBE, True),
    (Op.ALTER, Op.DESCRIBE, True),
    (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True),
    (Op.ALL, Op.IDEMPOTENT_WRITE, True),
    (Op.DESCRIBE, Op.READ, False),
    (Op.CREATE, Op.DESCRIBE, False),
    (Op.ALTER, Op.DESCRIBE_CONFIGS, False),
    (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False),
])
def test_implied_operations_allow(granted: AclOperation, asked: AclOperation,
                                  allowed: bool) -> None:
    assert decide({LITERAL: {entry(operation=granted)}}, operation=asked) is allowed


def test_implication_is_for_allow_only() -> None:
    # DENY READ does not deny DESCRIBE, which ALLOW DESCRIBE grants
    acls: Acls = {LITERAL: {entry(operation=Op.READ, permission=DENY),
                            entry(operation=Op.DESCRIBE)}}
    assert decide(acls, operation=Op.DESCRIBE)
    assert not decide(acls, operation=Op.READ)
    # ... but DENY ALL denies everything
    acls[WILDCARD] = {entry(operation=Op.ALL, permission=DENY)}
    assert not decide(acls, operation=Op.DESCRIBE)


# -- by resource type (idempotent InitProducerId) -------------------------------------------

def by_type(acls: Acls, policy: AclPolicy | None = None, operation: AclOperation = Op.WRITE,
            principal: str = "User:alice") -> bool:
    return (policy or AclPolicy()).authorize_by_resource_type(
        list(acls.items()), principal, "10.0.0.1", operation, RT.TOPIC)


def test_by_resource_type_needs_some_allow() -> None:
    assert not by_type({})
    assert by_type({}, AclPolicy(allow_everyone_if_no_acl_found=True))
    assert by_type({topic("t"): {entry(operation=Op.WRITE)}})
    assert by_type({topic("t-", PT.PREFIXED): {entry("User:*", Op.ALL)}})
    # no implied operations, other resource types do not count
    assert not by_type({topic("t"): {entry(operation=Op.READ)}}, operation=Op.DESCRIBE)
    assert not by_type({ResourcePattern(RT.GROUP, "g", PT.LITERAL): {
        entry(operation=Op.WRITE)}})
    assert by_type({WILDCARD: {entry("User:*", Op.ALL, DENY)}},
                   AclPolicy(super_users=frozenset({"User:alice"})))


@pytest.mark.parametrize(("acls", "allowed"), [
    # DENY on the literal * refuses even with allow.everyone.if.no.acl.found
    ({WILDCARD: {entry(operation=Op.WRITE, permission=DENY)},
      topic("t"): {entry(operation=Op.WRITE)}}, False),
    # an ALLOW covered by a DENY of the same literal or a DENY prefix of it does not count
    ({topic("t"): {entry(operation=Op.WRITE), entry(operation=Op.WRITE, permission=DENY)}},
     False),
    ({topic("ab"): {entry(operation=Op.WRITE)},
      topic("a", PT.PREFIXED): {entry(operation=Op.WRITE, permission=DENY)}}, False),
    ({topic("ab", PT.PREFIXED): {entry(operation=Op.WRITE)},
      topic("a", PT.PREFIXED): {entry(operation=Op.ALL, permission=DENY)}}, False),
    # ... one that is not covered does
    ({topic("a", PT.PREFIXED): {entry(operation=Op.WRITE)},
      topic("ab", PT.PREFIXED): {entry(operation=Op.WRITE, permission=DENY)}}, True),
    ({topic("t"): {entry(operation=Op.WRITE, permission=DENY)},
      topic("u"): {entry(operation=Op.WRITE)}}, True),
    ({WILDCARD: {entry(operation=Op.WRITE)},
      topic("t"): {entry(operation=Op.WRITE, permission=DENY)}}, True),
])
def test_by_resource_type_weighs_denies(acls: Acls, allowed: bool) -> None:
    assert by_type(acls) is allowed
    if not allowed and WILDCARD in acls:
        assert not by_type(acls, AclPolicy(allow_everyone_if_no_acl_found=True))
