"""moldau.tools.scram_user, the playbooks' idempotent SCRAM credentials: a credential is
written when missing or different (password or iterations), kept when its stored salted
form matches, deleted for an absent user; other keys of the user (quotas) stay; bad input
writes nothing. Against a fake store, then against the session's real ZooKeeper ensemble
(in-process and once as `python -m`, the way the broker role runs it)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.security.sasl.scram_credentials import (
    ScramCredential,
    ScramMechanism,
    derive_credential,
    password_matches,
)
from moldau.tools import scram_user
from moldau.tools.options import ToolError
from moldau.tools.scram_user import UserConfigStore
from moldau.tools.zk_tool_cli import EXIT_INPUT, EXIT_OK, EXIT_ZOOKEEPER

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


class FakeStore:
    """User config maps in memory, counting the writes."""

    def __init__(self) -> None:
        self.configs: dict[str, dict[str, str]] = {}
        self.writes = 0
        self.before_write: Callable[[dict[str, str]], None] | None = None

    def get_user_config(self, user: str) -> dict[str, str]:
        return dict(self.configs.get(user, {}))

    def update_user_config(self, user: str,
                           change: Callable[[dict[str, str]], dict[str, str]]) -> str:
        if self.before_write is not None:  # another writer comes first: one retry
            self.before_write(self.configs.setdefault(user, {}))
            self.before_write = None
        self.configs[user] = change(dict(self.configs.get(user, {})))
        self.writes += 1
        return "config_change_0000000000"

    def ensure_persistent_paths(self) -> None:
        pass


def run(store: UserConfigStore, *argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = scram_user.main(["--zookeeper", "zk:2181/moldau", *argv], stdin=io.StringIO(stdin),
                           stdout=out, stderr=err,
                           open_store=lambda _connect, _tls: (store, lambda: None))
    return code, out.getvalue(), err.getvalue()


def users_json(*users: Mapping[str, object]) -> str:
    return json.dumps(list(users))


def stored(store: FakeStore, user: str, mechanism: ScramMechanism) -> ScramCredential:
    return ScramCredential.from_config_value(store.configs[user][mechanism.mechanism_name])


def test_written_once_then_kept_and_rewritten_only_on_a_change() -> None:
    store = FakeStore()
    store.configs["broker"] = {"producer_byte_rate": "1024"}
    declared = users_json({"name": "broker", "password": "s3cret", "iterations": 8192,
                           "mechanisms": ["SCRAM-SHA-512", "SCRAM-SHA-256"]})

    code, out, err = run(store, "--users-file", "-", stdin=declared)
    assert (code, err) == (EXIT_OK, "")
    assert out.splitlines() == ["written: user 'broker' SCRAM-SHA-512 (8192 iterations)",
                                "written: user 'broker' SCRAM-SHA-256 (8192 iterations)",
                                "changed"]
    assert store.writes == 1  # both mechanisms in one write
    assert store.configs["broker"]["producer_byte_rate"] == "1024"
    first = stored(store, "broker", SHA512)
    assert first.iterations == 8192 and password_matches(SHA512, first, "s3cret")

    code, out, _ = run(store, "--users-file", "-", stdin=declared)
    assert code == EXIT_OK and out.splitlines()[-1] == "unchanged"
    assert out.count("kept: user 'broker'") == 2 and store.writes == 1
    assert stored(store, "broker", SHA512) == first  # the same salt: not rewritten

    rotated = declared.replace("s3cret", "n3w")
    code, out, _ = run(store, "--users-file", "-", stdin=rotated)
    assert code == EXIT_OK and out.splitlines()[-1] == "changed"
    assert password_matches(SHA512, stored(store, "broker", SHA512), "n3w")

    more_iterations = rotated.replace("8192", "16384")
    run(store, "--users-file", "-", stdin=more_iterations)
    assert stored(store, "broker", SHA256).iterations == 16384
    assert store.writes == 3
    assert "s3cret" not in out and "n3w" not in out


def test_a_malformed_or_foreign_credential_is_rewritten() -> None:
    store = FakeStore()
    other = derive_credential(SHA512, "s3cret", 4096).to_config_value()  # 4096 != declared
    store.configs["a"] = {"SCRAM-SHA-512": other}
    store.configs["b"] = {"SCRAM-SHA-512": "salt=??,iterations=x"}
    code, out, _ = run(store, "--users-file", "-", stdin=users_json(
        {"name": "a", "password": "s3cret", "mechanisms": ["SCRAM-SHA-512"], "iterations": 8192},
        {"name": "b", "password": "s3cret", "mechanisms": ["SCRAM-SHA-512"]}))
    assert code == EXIT_OK
    assert out.splitlines() == ["written: user 'a' SCRAM-SHA-512 (8192 iterations)",
                                "written: user 'b' SCRAM-SHA-512 (4096 iterations)",
                                "changed"]


def test_single_user_password_from_stdin_or_file(tmp_path: Path) -> None:
    store = FakeStore()
    code, out, _ = run(store, "--user", "admin", "--mechanism", "SCRAM-SHA-256",
                       stdin="pw with spaces \n")
    assert code == EXIT_OK and out.splitlines()[-1] == "changed"
    assert password_matches(SHA256, stored(store, "admin", SHA256), "pw with spaces ")

    secret = tmp_path / "password"
    secret.write_text("pw with spaces \n", encoding="utf-8")
    code, out, _ = run(store, "--user", "admin", "--mechanism", "SCRAM-SHA-256",
                       "--password-file", str(secret))
    assert code == EXIT_OK and out.splitlines() == [
        "kept: user 'admin' SCRAM-SHA-256 (the stored credential matches)", "unchanged"]


def test_absent_users_lose_their_credentials_only() -> None:
    store = FakeStore()
    store.configs["old"] = {"SCRAM-SHA-512": derive_credential(SHA512, "x", 4096)
                            .to_config_value(), "consumer_byte_rate": "10"}
    code, out, _ = run(store, "--user", "old", "--mechanism", "SCRAM-SHA-512",
                       "--mechanism", "SCRAM-SHA-256", "--delete")
    assert code == EXIT_OK
    assert out.splitlines() == ["deleted: user 'old' SCRAM-SHA-512",
                                "absent: user 'old' SCRAM-SHA-256 (no credential to delete)",
                                "changed"]
    assert store.configs["old"] == {"consumer_byte_rate": "10"}
    code, out, _ = run(store, "--users-file", "-", stdin=users_json(
        {"name": "old", "state": "absent", "mechanisms": ["SCRAM-SHA-512"]}))
    assert out.splitlines()[-1] == "unchanged" and store.writes == 1


def test_a_concurrent_writer_is_taken_into_account() -> None:
    """The compare-and-set retry decides again on the map it replaces: a matching
    credential another writer stored meanwhile is kept, its quota too."""
    store = FakeStore()
    theirs = derive_credential(SHA512, "s3cret", 4096).to_config_value()

    def concurrent(config: dict[str, str]) -> None:
        config.update({"SCRAM-SHA-512": theirs, "request_percentage": "50"})
    store.before_write = concurrent
    code, out, _ = run(store, "--users-file", "-", stdin=users_json(
        {"name": "u", "password": "s3cret", "mechanisms": ["SCRAM-SHA-512", "SCRAM-SHA-256"]}))
    assert code == EXIT_OK
    assert out.splitlines()[:2] == [
        "kept: user 'u' SCRAM-SHA-512 (the stored credential matches)",
        "written: user 'u' SCRAM-SHA-256 (4096 iterations)"]
    assert store.configs["u"]["SCRAM-SHA-512"] == theirs
    assert store.configs["u"]["request_percentage"] == "50"


@pytest.mark.parametrize(("argv", "stdin", "message"), [
    (["--users-file", "-"], "{", "standard input: not JSON"),
    (["--users-file", "-"], '{"name": "a"}', "expected a JSON list of users"),
    (["--users-file", "-"], users_json({"name": "a", "mechanisms": ["SCRAM-SHA-1"],
                                        "password": "p"}), "unknown SCRAM mechanism 'SCRAM-SHA-1'"),
    (["--users-file", "-"], users_json({"name": "a", "mechanisms": ["SCRAM-SHA-512"],
                                        "password": "p", "iterations": 1000}),
     "iterations 1000 is outside 4096..16384"),
    (["--users-file", "-"], users_json({"name": "a", "mechanisms": ["SCRAM-SHA-512"]}),
     "a present user needs a 'password' string"),
    (["--users-file", "-"], users_json({"name": "a", "mechanisms": ["SCRAM-SHA-512"],
                                        "password": ""}), "user 'a': the password is empty"),
    (["--users-file", "-"], users_json({"name": "a", "mechanisms": [], "password": "p"}),
     "name at least one mechanism"),
    (["--users-file", "-"], users_json({"name": "a", "mechanisms": ["SCRAM-SHA-512"],
                                        "password": "p", "pasword": "typo"}),
     "unknown keys ['pasword']"),
    (["--users-file", "-"], users_json(*[{"name": "a", "mechanisms": ["SCRAM-SHA-512"],
                                          "password": "p"} for _ in range(2)]),
     "users declared more than once: ['a']"),
    (["--users-file", "-"], users_json({"name": "<default>", "mechanisms": ["SCRAM-SHA-512"],
                                        "password": "p"}), "cannot hold SCRAM credentials"),
    (["--users-file", "-", "--user", "a"], "[]", "do not combine it with --user"),
    (["--user", "a", "--mechanism", "SCRAM-SHA-512"], "\n", "user 'a': the password is empty"),
    (["--user", "a", "--mechanism", "SCRAM-SHA-512", "--password-file", "/nonexistent/pw"], "",
     "cannot read the password: /nonexistent/pw"),
    ([], "", "name the user (--user NAME) or give a --users-file"),
])
def test_invalid_input_writes_nothing(argv: list[str], stdin: str, message: str) -> None:
    store = FakeStore()
    code, out, err = run(store, *argv, stdin=stdin)
    assert code == EXIT_INPUT and out == ""
    assert message in err
    assert store.writes == 0


def test_an_unreachable_zookeeper_is_exit_1() -> None:
    def unreachable(_connect: str, _tls: str | None) -> tuple[UserConfigStore, Callable[[], None]]:
        raise ToolError("Timed out waiting for connection to ZooKeeper")
    err = io.StringIO()
    code = scram_user.main(["--zookeeper", "zk:2181", "--user", "a", "--mechanism",
                            "SCRAM-SHA-512"], stdin=io.StringIO("p"), stdout=io.StringIO(),
                           stderr=err, open_store=unreachable)
    assert code == EXIT_ZOOKEEPER
    assert "scram_user: ZooKeeper zk:2181: Timed out waiting" in err.getvalue()


# ------------------------------------------------------------------ real ZooKeeper


@pytest.fixture
def zk(zk_ensemble: ZooKeeperEnsemble, zk_chroot: str) -> Iterator[KafkaZkClient]:
    client = KafkaZkClient(zk_ensemble.connect_string, zk_chroot, session_timeout_ms=6000)
    client.start()
    yield client
    client.close()


def test_against_zookeeper_before_any_broker(zk: KafkaZkClient) -> None:
    """A fresh chroot, as on a first deploy: the credential lands in Kafka's znode with a
    change notification; the second run keeps it; a quota key survives."""
    connect = zk.connect_string
    declared = users_json({"name": "inter broker", "password": "s3cret", "iterations": 8192,
                           "mechanisms": ["SCRAM-SHA-512"]})

    def real(argv: list[str], stdin: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = scram_user.main(["--zookeeper", connect, *argv], stdin=io.StringIO(stdin),
                               stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    assert real(["--users-file", "-"], declared)[:2] == (
        EXIT_OK, "written: user 'inter broker' SCRAM-SHA-512 (8192 iterations)\nchanged\n")
    assert zk.get_children("/config/users") == ["inter%20broker"]
    assert len(zk.get_children("/config/changes")) == 1
    zk.update_user_config("inter broker", lambda c: {**c, "producer_byte_rate": "2048"})
    credential = ScramCredential.from_config_value(
        zk.get_user_config("inter broker")["SCRAM-SHA-512"])
    assert password_matches(SHA512, credential, "s3cret")

    code, out, _ = real(["--users-file", "-"], declared)
    assert (code, out.splitlines()[-1]) == (EXIT_OK, "unchanged")
    assert len(zk.get_children("/config/changes")) == 2  # only the quota write added one
    assert zk.get_user_config("inter broker")["producer_byte_rate"] == "2048"


def test_as_a_module_with_the_password_on_stdin(zk: KafkaZkClient) -> None:
    command = [sys.executable, "-m", "moldau.tools.scram_user", "--zookeeper",
               zk.connect_string, "--user", "admin", "--mechanism", "SCRAM-SHA-256"]
    done = subprocess.run(command, input="adm1n-secret\n", capture_output=True, text=True,
                          timeout=60, check=False)
    assert (done.returncode, done.stderr) == (EXIT_OK, "")
    assert done.stdout == "written: user 'admin' SCRAM-SHA-256 (4096 iterations)\nchanged\n"
    credential = ScramCredential.from_config_value(zk.get_user_config("admin")["SCRAM-SHA-256"])
    assert password_matches(SHA256, credential, "adm1n-secret")
