"""Broker configuration: properties syntax, types, defaults, precedence, validation, docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import moldau.server.config as config_package
from moldau.server.config import (
    KEYS,
    KEYS_LIST,
    LONG_MAX,
    BrokerConfig,
    ConfigError,
    markdown_table,
    parse_properties,
)
from moldau.storage.config import LogConfig

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "broker-config.md"
ZK = "zookeeper.connect=localhost:2181\n"

# Shaped like Kafka's shipped ZooKeeper-mode config/server.properties (our own comments).
KAFKA_STYLE = """\
# A single broker with ZooKeeper.

############################# Server Basics #############################
broker.id=0

############################# Socket Server Settings #############################
#listeners=PLAINTEXT://:9092
#advertised.listeners=PLAINTEXT://your.host.name:9092
#listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

############################# Log Flush Policy #############################
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000

############################# Log Retention Policy #############################
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000

############################# Zookeeper #############################
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000

############################# Group Coordinator Settings #############################
group.initial.rebalance.delay.ms=0
"""

# Every key the issue text names.
ISSUE_KEYS = [
    "broker.id", "reserved.broker.max.id", "listeners", "advertised.listeners",
    "listener.security.protocol.map", "inter.broker.listener.name", "log.dirs",
    "zookeeper.connect", "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms",
    "num.partitions", "default.replication.factor", "auto.create.topics.enable",
    "delete.topic.enable", "message.max.bytes", "socket.request.max.bytes",
    "queued.max.requests", "log.retention.ms", "log.retention.minutes", "log.retention.hours",
    "log.roll.ms", "log.roll.hours", "compression.type", "broker.rack",
    "inter.broker.protocol.version", "ssl.principal.mapping.rules", "ssl.client.auth",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.truststore.location",
]


def load(text: str = "") -> BrokerConfig:
    return BrokerConfig.from_properties(ZK + text)


def raises_on(key: str, text: str, value: str | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(text)
    assert info.value.key == key, str(info.value)
    assert key in str(info.value)
    if value is not None:
        assert value in str(info.value)
    return info.value


# ---- properties syntax


def test_separators_comments_and_whitespace() -> None:
    props = parse_properties(
        "# comment\n! also a comment\n\n  a=1\nb: 2\nc 3\nd\t=\t 4 \ne=\nf\n  # indented\n"
    )
    assert props == {"a": "1", "b": "2", "c": "3", "d": "4 ", "e": "", "f": ""}


def test_continuations_and_escapes() -> None:
    text = (
        "list = one,\\\n      two,\\\n   three\n"
        "path=C:\\\\data\\\\kafka\n"
        "tab=a\\tb\n"
        "uni=caf\\u00e9\n"
        "key\\ with\\=sep\\:s=v\n"
        "even=ends with backslash\\\\\n"
        "next=x\n"
    )
    props = parse_properties(text)
    assert props["list"] == "one,two,three"
    assert props["path"] == "C:\\data\\kafka"
    assert props["tab"] == "a\tb"
    assert props["uni"] == "café"
    assert props["key with=sep:s"] == "v"
    assert props["even"] == "ends with backslash\\"
    assert props["next"] == "x"


def test_continuation_line_starting_with_hash_is_value() -> None:
    assert parse_properties("a=1,\\\n  #2\n") == {"a": "1,#2"}


def test_last_duplicate_wins_and_bad_unicode_escape() -> None:
    assert parse_properties("a=1\na=2\n") == {"a": "2"}
    with pytest.raises(ConfigError, match=r"Malformed \\uxxxx encoding") as err:
        parse_properties("a=\\u12G4\n")
    assert err.value.key == "a"


def test_from_file_reads_iso_8859_1_and_names_a_bad_escape(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes(b"zookeeper.connect=zk:2181\nlog.dirs=/caf\xe9\n")
    assert BrokerConfig.from_file(str(path)).log_dirs == ["/caf\u00e9"]
    path.write_bytes(b"zookeeper.connect=zk:2181\nlog.dirs=/d\\u00zz\n")
    with pytest.raises(ConfigError) as err:
        BrokerConfig.from_file(str(path))
    assert err.value.key == "log.dirs"


def test_overrides_are_split_at_the_first_equals_without_escapes(tmp_path: Path) -> None:
    from moldau.server.main import load_config

    path = tmp_path / "server.properties"
    path.write_text("zookeeper.connect=zk:2181\nlog.dirs=/a\n", encoding="latin-1")
    config = load_config(str(path), ["log.dirs=/b\\c=d", "broker.id=7"])
    assert (config.broker_id, config.log_dirs) == (7, ["/b\\c=d"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_config(str(path), ["broker.id"])


# ---- defaults, types, validation


def test_defaults_match_kafka() -> None:
    c = load()
    assert c["broker.id"] == -1
    assert c["message.max.bytes"] == 1048588
    assert c["queued.max.requests"] == 500
    assert c["socket.request.max.bytes"] == 104857600
    assert c["num.partitions"] == 1
    assert c["zookeeper.session.timeout.ms"] == 18000
    assert c["zookeeper.connection.timeout.ms"] == 18000  # falls back to the session timeout
    assert c["compression.type"] == "producer"
    assert c["inter.broker.protocol.version"] == "3.9-IV0"
    assert c["ssl.enabled.protocols"] == ["TLSv1.2", "TLSv1.3"]
    assert c["log.cleanup.policy"] == ["delete"]
    assert c.log_dirs == ["/tmp/kafka-logs"]
    assert c.log_retention_ms == 7 * 24 * 3600 * 1000
    assert c.log_roll_ms == 7 * 24 * 3600 * 1000
    assert c.log_roll_jitter_ms == 0
    assert c.warnings == []


def test_type_conversion() -> None:
    c = load("auto.create.topics.enable = FALSE\nlog.cleaner.min.cleanable.ratio=0.25\n"
             "log.retention.bytes= 5000000000 \nsasl.enabled.mechanisms=PLAIN, SCRAM-SHA-512\n"
             "broker.rack= rack-1 \n")
    assert c["auto.create.topics.enable"] is False
    assert c["log.cleaner.min.cleanable.ratio"] == 0.25
    assert c["log.retention.bytes"] == 5_000_000_000
    assert c["sasl.enabled.mechanisms"] == ["PLAIN", "SCRAM-SHA-512"]
    assert c["broker.rack"] == "rack-1"


def test_dict_input_with_python_values() -> None:
    c = BrokerConfig.from_properties({"zookeeper.connect": "zk:2181", "num.partitions": 3,
                                      "delete.topic.enable": False})
    assert c["num.partitions"] == 3
    assert c["delete.topic.enable"] is False
    assert {"num.partitions", "delete.topic.enable"} <= c.explicit


@pytest.mark.parametrize(
    ("key", "text", "value"),
    [
        ("num.partitions", "num.partitions=zero", "zero"),
        ("num.partitions", "num.partitions=0", "0"),
        ("num.partitions", "num.partitions=", None),
        ("message.max.bytes", "message.max.bytes=3000000000", "3000000000"),
        ("delete.topic.enable", "delete.topic.enable=yes", "yes"),
        ("compression.type", "compression.type=brotli", "brotli"),
        ("log.cleanup.policy", "log.cleanup.policy=delete,shrink", "shrink"),
        ("log.cleaner.min.cleanable.ratio", "log.cleaner.min.cleanable.ratio=1.5", "1.5"),
        ("log.segment.bytes", "log.segment.bytes=10", "10"),
        ("log.message.timestamp.type", "log.message.timestamp.type=Now", "Now"),
        ("ssl.client.auth", "ssl.client.auth=always", "always"),
        ("queued.max.requests", "queued.max.requests=0", "0"),
        ("socket.request.max.bytes", "socket.request.max.bytes=-5", "-5"),
        ("offsets.topic.replication.factor", "offsets.topic.replication.factor=40000", "40000"),
        ("log.roll.ms", "log.roll.ms=0", "0"),
        ("zookeeper.metadata.migration.enable", "zookeeper.metadata.migration.enable=true",
         None),
    ],
)
def test_invalid_values_name_the_key(key: str, text: str, value: str | None) -> None:
    raises_on(key, text, value)


def test_zookeeper_connect_is_required() -> None:
    with pytest.raises(ConfigError, match=r"zookeeper\.connect"):
        BrokerConfig.from_properties("broker.id=1\n")


def test_unknown_keys_are_warnings() -> None:
    c = load("port=9092\nmy.custom.key=1\n")
    assert len(c.warnings) == 2
    assert any("'port'" in w for w in c.warnings)
    assert "port" not in c.values


@pytest.mark.parametrize("key", ["process.roles", "node.id", "controller.quorum.voters",
                                 "controller.listener.names", "metadata.log.dir"])
def test_kraft_keys_rejected(key: str) -> None:
    err = raises_on(key, f"{key}=broker\n")
    assert "ZooKeeper mode" in str(err)


@pytest.mark.parametrize("key,text", [
    ("sasl.login.class", "com.example.Login"),
])
def test_security_keys_moldau_cannot_enforce_stop_startup(key: str, text: str) -> None:
    err = raises_on(key, f"{key}={text}\n", text)
    assert "refuses to start rather than ignore it" in str(err)


def test_unenforced_security_keys_at_their_defaults_are_fine() -> None:
    c = load("authorizer.class.name=\nmax.connection.creation.rate=2147483647\n")
    assert c.values["authorizer.class.name"] == ""


def test_the_acl_authorizer_and_its_keys_are_accepted() -> None:
    c = load("authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
             "super.users=User:admin;User:CN=broker1,O=Moldau\n"
             "allow.everyone.if.no.acl.found=true\n")
    assert c.values["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert c.values["super.users"] == "User:admin;User:CN=broker1,O=Moldau"
    assert c.values["allow.everyone.if.no.acl.found"] is True


@pytest.mark.parametrize("name,why", [
    ("kafka.security.auth.SimpleAclAuthorizer", "removed in Kafka 3.0"),
    ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "KRaft"),
    ("com.example.MyAuthorizer", "Moldau provides only"),
])
def test_an_authorizer_moldau_cannot_load_stops_startup(name: str, why: str) -> None:
    # fail closed: a broker that started without the authorizer asked for would allow all
    err = raises_on("authorizer.class.name", f"authorizer.class.name={name}\n", name)
    assert f"java.lang.ClassNotFoundException: {name}" in str(err) and why in str(err)


def test_a_malformed_super_user_stops_startup() -> None:
    err = raises_on("super.users", "super.users=User:admin;bob\n", "bob")
    assert "principalType:principalName" in str(err)


# ---- precedence rules


def test_retention_precedence() -> None:
    assert load("log.retention.hours=1\n").log_retention_ms == 3600000
    assert load("log.retention.hours=1\nlog.retention.minutes=2\n").log_retention_ms == 120000
    both = "log.retention.hours=1\nlog.retention.minutes=2\nlog.retention.ms=500\n"
    assert load(both).log_retention_ms == 500
    assert load("log.retention.ms=-1\n").log_retention_ms == -1
    assert load("log.retention.hours=-1\n").log_retention_ms == -1
    assert load("log.retention.minutes=-7\nlog.retention.hours=5\n").log_retention_ms == -1
    assert load("log.retention.ms=-1\n").log_config().retention_ms == -1


def test_roll_and_jitter_precedence() -> None:
    c = load("log.roll.hours=2\nlog.roll.jitter.hours=1\n")
    assert (c.log_roll_ms, c.log_roll_jitter_ms) == (7200000, 3600000)
    c = load("log.roll.hours=2\nlog.roll.ms=1000\nlog.roll.jitter.hours=1\nlog.roll.jitter.ms=7\n")
    assert (c.log_roll_ms, c.log_roll_jitter_ms) == (1000, 7)


def test_log_dirs_wins_over_log_dir() -> None:
    assert load("log.dir=/a\n").log_dirs == ["/a"]
    assert load("log.dir=/a\nlog.dirs=/b, /c\n").log_dirs == ["/b", "/c"]
    raises_on("log.dirs", "log.dirs=/b,/b\n")


def test_flush_and_timestamp_fallbacks() -> None:
    c = load("log.flush.scheduler.interval.ms=2000\nlog.message.timestamp.difference.max.ms=9\n")
    assert c["log.flush.interval.ms"] == 2000
    assert c["log.message.timestamp.before.max.ms"] == 9
    assert c["log.message.timestamp.after.max.ms"] == 9
    c = load("log.flush.interval.ms=5\nlog.message.timestamp.difference.max.ms=9\n"
             "log.message.timestamp.after.max.ms=3\n")
    assert c["log.flush.interval.ms"] == 5
    assert c["log.message.timestamp.after.max.ms"] == 3
    assert c["log.message.timestamp.before.max.ms"] == 9


# ---- broker.id


def test_broker_id_generation_rules() -> None:
    assert load("broker.id=-1\n").broker_id == -1
    assert load("broker.id=1000\n").broker_id == 1000
    raises_on("broker.id", "broker.id=1001\n", "1001")
    raises_on("broker.id", "broker.id=-2\n")
    assert load("broker.id=5000\nbroker.id.generation.enable=false\n").broker_id == 5000
    raises_on("broker.id", "broker.id=-1\nbroker.id.generation.enable=false\n")
    assert load("broker.id=1500\nreserved.broker.max.id=2000\n").broker_id == 1500


# ---- ZooKeeper connect string


def test_zookeeper_connect_with_chroot() -> None:
    c = BrokerConfig.from_properties("zookeeper.connect=zk1:2181,zk2:2182,zk3/kafka/prod\n")
    assert c.zookeeper is not None
    assert c.zookeeper.hosts == (("zk1", 2181), ("zk2", 2182), ("zk3", 2181))
    assert c.zookeeper.chroot == "/kafka/prod"
    assert c.zookeeper.connect_string == "zk1:2181,zk2:2182,zk3:2181"
    assert BrokerConfig.from_properties("zookeeper.connect=zk:2181/\n").zookeeper.chroot is None


@pytest.mark.parametrize("bad", ["zk:2181/kafka/", "zk:port", "zk:2181,,zk2:2181", "zk:99999"])
def test_zookeeper_connect_invalid(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"zookeeper\.connect"):
        BrokerConfig.from_properties(f"zookeeper.connect={bad}\n")


# ---- listeners


def test_listeners_parsing_and_advertised_default() -> None:
    c = load("listeners=PLAINTEXT://:9092,ssl://0.0.0.0:9093,INTERNAL://[::1]:9094\n"
             "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL\n")
    assert [(e.listener, e.host, e.port, e.security_protocol) for e in c.listeners] == [
        ("PLAINTEXT", "", 9092, "PLAINTEXT"),
        ("SSL", "0.0.0.0", 9093, "SSL"),
        ("INTERNAL", "::1", 9094, "SSL"),
    ]
    assert str(c.listeners[2]) == "INTERNAL://[::1]:9094"
    assert c.advertised_listeners == c.listeners
    assert c.inter_broker_listener_name == "PLAINTEXT"


def test_default_protocol_map_covers_protocol_names() -> None:
    assert load().protocol_map == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL",
                                   "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}


def test_advertised_listeners_and_inter_broker_name() -> None:
    c = load("listeners=INTERNAL://:9092,EXTERNAL://:9093\n"
             "advertised.listeners=INTERNAL://b1.local:9092,EXTERNAL://b1.example.com:9093\n"
             "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SSL\n"
             "inter.broker.listener.name=INTERNAL\n")
    assert [e.host for e in c.advertised_listeners] == ["b1.local", "b1.example.com"]
    assert c.inter_broker_listener_name == "INTERNAL"
    assert load("listeners=PLAINTEXT://:9092,SSL://:9093\n"
                "security.inter.broker.protocol=SSL\n").inter_broker_listener_name == "SSL"


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("listeners", "listeners=PLAINTEXT://:9092,PLAINTEXT://:9093\n"),
        ("listeners", "listeners=PLAINTEXT://:9092,SSL://:9092\n"),
        ("listeners", "listeners=FOO://:9092\n"),
        ("listeners", "listeners=PLAINTEXT:9092\n"),
        ("listeners", "listeners=PLAINTEXT://:70000\n"),
        ("listeners", "listeners=\n"),
        ("listener.security.protocol.map", "listener.security.protocol.map=A:TLS\n"),
        ("listener.security.protocol.map", "listener.security.protocol.map=A\n"),
        ("advertised.listeners", "advertised.listeners=SSL://h:9093\n"),
        ("advertised.listeners", "advertised.listeners=PLAINTEXT://0.0.0.0:9092\n"),
        ("inter.broker.listener.name", "inter.broker.listener.name=PLAINTEXT\n"
                                       "security.inter.broker.protocol=PLAINTEXT\n"),
        ("inter.broker.listener.name", "inter.broker.listener.name=REPLICATION\n"),
        ("security.inter.broker.protocol", "security.inter.broker.protocol=SSL\n"),
        ("security.inter.broker.protocol", "security.inter.broker.protocol=TLS\n"),
    ],
)
def test_listener_validation(key: str, text: str) -> None:
    raises_on(key, text)


def test_port_zero_may_repeat() -> None:
    c = load("listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0\n")
    assert [e.port for e in c.listeners] == [0, 0]


# ---- a Kafka-style file


def test_kafka_style_server_properties_loads_clean() -> None:
    c = BrokerConfig.from_properties(KAFKA_STYLE)
    assert c.warnings == []
    assert c.broker_id == 0
    assert c.log_dirs == ["/tmp/kafka-logs"]
    assert c["group.initial.rebalance.delay.ms"] == 0
    assert c["offsets.topic.replication.factor"] == 1
    assert c.zookeeper is not None and c.zookeeper.chroot is None
    assert [str(e) for e in c.listeners] == ["PLAINTEXT://:9092"]


def test_from_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(KAFKA_STYLE, encoding="latin-1")
    assert BrokerConfig.from_file(str(path)).broker_id == 0


# ---- LogConfig mapping


def test_log_config_defaults_equal_storage_defaults() -> None:
    assert load().log_config() == LogConfig()


def test_log_config_mapping() -> None:
    c = load("log.segment.bytes=1048576\nlog.roll.hours=1\nlog.roll.jitter.ms=10\n"
             "log.retention.minutes=30\nlog.retention.bytes=999\n"
             "log.cleanup.policy=compact,delete\nlog.index.interval.bytes=100\n"
             "log.index.size.max.bytes=4096\nlog.message.timestamp.type=LogAppendTime\n"
             "message.max.bytes=2000\ncompression.type=zstd\nmin.insync.replicas=2\n"
             "log.cleaner.min.cleanable.ratio=0.1\nlog.cleaner.delete.retention.ms=5\n"
             "log.cleaner.min.compaction.lag.ms=6\nlog.cleaner.max.compaction.lag.ms=7\n"
             "log.segment.delete.delay.ms=8\nlog.flush.interval.messages=9\n"
             "log.flush.interval.ms=11\nlog.preallocate=true\n"
             "unclean.leader.election.enable=true\n")
    lc = c.log_config()
    assert lc == LogConfig(
        segment_bytes=1048576, segment_ms=3600000, segment_jitter_ms=10, retention_ms=1800000,
        retention_bytes=999, cleanup_policy=("compact", "delete"), index_interval_bytes=100,
        segment_index_bytes=4096, message_timestamp_type="LogAppendTime",
        max_message_bytes=2000, compression_type="zstd", min_insync_replicas=2,
        min_cleanable_dirty_ratio=0.1, delete_retention_ms=5, min_compaction_lag_ms=6,
        max_compaction_lag_ms=7, file_delete_delay_ms=8, flush_messages=9, flush_ms=11,
        preallocate=True, unclean_leader_election_enable=True,
    )
    assert lc.flush_ms == 11 and lc.max_compaction_lag_ms != LONG_MAX


def test_log_config_cross_field_error_names_broker_key() -> None:
    raises_on("log.cleaner.min.compaction.lag.ms",
              "log.cleaner.min.compaction.lag.ms=10\nlog.cleaner.max.compaction.lag.ms=5\n")


# ---- describe and the startup dump


def test_describe_sources_and_hidden_passwords() -> None:
    c = load("num.partitions=3\nssl.keystore.password=secret\nlog.dirs=/a,/b\n")
    rows = {k: (v, s) for k, v, s in c.describe()}
    assert rows["num.partitions"] == ("3", "STATIC_BROKER_CONFIG")
    assert rows["default.replication.factor"] == ("1", "DEFAULT_CONFIG")
    assert rows["ssl.keystore.password"] == (None, "STATIC_BROKER_CONFIG")
    assert rows["zookeeper.connect"] == ("localhost:2181", "STATIC_BROKER_CONFIG")
    assert "process.roles" not in rows
    assert [k for k, _, _ in c.describe()] == sorted(rows)


def test_dump_is_sorted_and_hides_passwords() -> None:
    c = load("ssl.keystore.password=Sw0rdf1sh\nsasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n")
    text = c.dump()
    lines = text.splitlines()
    assert lines[0].startswith("KafkaConfig values:")
    entries = [line.strip() for line in lines[1:]]
    assert entries == sorted(entries, key=lambda e: e.split(" = ")[0])
    assert "ssl.keystore.password = [hidden]" in entries
    assert "Sw0rdf1sh" not in text
    assert "sasl.enabled.mechanisms = [PLAIN, SCRAM-SHA-256]" in entries
    assert "broker.rack = null" in entries


# ---- the table and the docs


def test_table_is_well_formed() -> None:
    for key in KEYS_LIST:
        assert re.fullmatch(r"[a-z][a-zA-Z0-9.]*[a-z]", key.name), key.name
        if key.status != "rejected" and key.validator is not None and key.default is not None:
            key.validator.check(key.name, key.default)  # Kafka's defaults pass their validators
    families = ("log.", "num.", "socket.", "replica.", "zookeeper.", "offsets.", "group.",
                "transaction.", "ssl.", "sasl.")
    for family in families:
        assert any(k.startswith(family) for k in KEYS), family
    for key in KEYS_LIST:
        if key.status == "accepted":
            assert key.note, key.name


def test_validators_take_values_of_their_keys_type() -> None:
    """A validator sees a converted value: one of another Python type is a caller's bug
    (TypeError), not an operator's mistake (ConfigError)."""
    for name, wrong in (("num.partitions", "1"), ("compression.gzip.level", ["1"]),
                        ("inter.broker.protocol.version", 3.9)):
        validator = KEYS[name].validator
        assert validator is not None, name
        with pytest.raises(TypeError):
            validator.check(name, wrong)


def test_package_reexports_its_public_names() -> None:
    """Callers import from moldau.server.config whichever module of the package holds a name."""
    for name in config_package.__all__:
        assert hasattr(config_package, name), name
    assert config_package.KEYS is config_package.keys.KEYS


def test_issue_keys_present_and_valid() -> None:
    c = load()
    for name in ISSUE_KEYS:
        assert name in KEYS, name
        assert KEYS[name].status == "implemented", name
        assert name in c.values


def test_committed_doc_matches_code() -> None:
    assert DOC.read_text(encoding="utf-8") == markdown_table(), (
        "docs/broker-config.md is stale: regenerate it with "
        "python -c 'from moldau.server.config import markdown_table as m; "
        "open(\"docs/broker-config.md\", \"w\").write(m())'"
    )
    for name in ISSUE_KEYS:
        assert f"| `{name}` |" in DOC.read_text(encoding="utf-8"), name
