"""kafka-delegation-tokens.sh against a real broker with a SASL_PLAINTEXT (SCRAM) listener
and delegation tokens enabled: create, describe, renew and expire as an operator runs them
(the console script, `--command-config` with a SCRAM login), Kafka 3.9's lines and table,
its failures on stderr, and its command line checks."""

from __future__ import annotations

import base64
import dataclasses
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.client.blocking import BlockingConnection
from moldau.cluster.zk_client import KafkaZkClient
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.describe_delegation_token_request import (
    DescribeDelegationTokenRequest,
)
from moldau.security.sasl.scram import ScramClient
from moldau.security.sasl.scram_credentials import ScramMechanism, derive_credential
from moldau.server.handlers.services import HandlerServices

from .toolrun import Result, assert_golden, run

# Until the broker hands its token manager to the handlers (HandlerServices'
# delegation_tokens, and the SASL authenticator's token_authenticated session attribute),
# the token APIs answer 61 and these tests cannot pass: skipped, saying why.
pytestmark = pytest.mark.skipif(
    "delegation_tokens" not in {f.name for f in dataclasses.fields(HandlerServices)},
    reason="the broker does not wire its delegation token manager into the handlers yet")
SCRIPT = "kafka-delegation-tokens.sh"
SECRET = "tool-token-secret"
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required;'
USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
DATE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[dict[str, Any]]:
    zk_connect = zk_ensemble.connect_string + f"/token-tool-{uuid.uuid4().hex[:8]}"
    zk = KafkaZkClient(zk_connect)
    zk.start()
    try:
        for user, password in USERS.items():
            zk.update_user_config(user, lambda c, p=password: {**c, **{
                m.mechanism_name: derive_credential(m, p, 4096).to_config_value()
                for m in ScramMechanism}})
    finally:
        zk.close()
    plain, sasl = free_port(), free_port()
    directory = tmp_path_factory.mktemp("token-tool")
    process = BrokerProcess(str(directory / "broker"), 1, zk_connect, port=plain, properties={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "delegation.token.secret.key": SECRET,
    })
    configs = {}
    for user, password in USERS.items():
        path = directory / f"{user}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                        "sasl.jaas.config=org.apache.kafka.common.security.scram."
                        f'ScramLoginModule required username="{user}" password="{password}";\n')
        configs[user] = str(path)
    plaintext = directory / "plaintext.properties"
    plaintext.write_text("")
    process.start()
    try:
        yield {"sasl": f"127.0.0.1:{sasl}", "sasl_port": sasl, "plain": f"127.0.0.1:{plain}",
               "configs": configs, "plaintext": str(plaintext)}
    finally:
        assert process.stop() == 0, process.tail()


@pytest.fixture(scope="module", autouse=True)
def utc_dates() -> Iterator[None]:
    """The tool prints local times: UTC for the tools run here (they inherit TZ)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "UTC")
        yield


def tokens(broker: dict[str, Any], user: str, *args: str) -> Result:
    """One run as `user` over SASL."""
    return run(SCRIPT, "--bootstrap-server", broker["sasl"], "--command-config",
               broker["configs"][user], *args)


def normalise(text: str, **values: str) -> str:
    for name, value in values.items():
        text = text.replace(value, f"<{name.upper()}>")
    return DATE.sub("<DATE>", text)


def created_token(out: str) -> tuple[str, str]:
    """The token id and HMAC a create printed."""
    token_id = re.search(r"Created delegation token with tokenId : (\S+)", out).group(1)
    row = next(line for line in out.splitlines() if line.startswith(token_id + " "))
    return token_id, row.split()[1]


def described(broker: dict[str, Any], user: str, owner: str) -> Any:
    """The tokens of `owner` as the broker describes them to `user` (protocol level)."""
    Owner = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
    with BlockingConnection("127.0.0.1", broker["sasl_port"], sasl=lambda: ScramClient(
            ScramMechanism.SCRAM_SHA_512, user, USERS[user])) as conn:
        return conn.request_by_name("DescribeDelegationToken", 3, owners=[
            Owner(principal_type="User", principal_name=owner)]).tokens


def utc(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M", time.gmtime(ms / 1000))


def test_create_prints_the_call_and_the_token_table(broker) -> None:
    result = tokens(broker, "alice", "--create", "--max-life-time-period", "-1",
                    "--renewer-principal", "User:bob")
    assert result.code == 0, result.err
    token_id, hmac = created_token(result.out)
    assert_golden("delegation-tokens-create.txt",
                  normalise(result.out, token_id=token_id, hmac=hmac))
    [token] = [t for t in described(broker, "alice", "alice") if t.token_id == token_id]
    assert base64.b64encode(bytes(token.hmac)).decode() == hmac
    assert DATE.findall(result.out) == [utc(token.issue_timestamp), utc(token.expiry_timestamp),
                                        utc(token.max_timestamp)]


def test_describe_for_owners_and_for_the_current_user(broker) -> None:
    created = tokens(broker, "carol", "--create", "--max-life-time-period", "3600000")
    token_id, hmac = created_token(created.out)
    result = tokens(broker, "carol", "--describe", "--owner-principal", "User:carol")
    assert result.code == 0, result.err
    assert_golden("delegation-tokens-describe-owner.txt",
                  normalise(result.out, token_id=token_id, hmac=hmac))
    # as Kafka 3.9's tool: no --owner-principal sends an empty owner list, which asks for
    # no token at all
    result = tokens(broker, "carol", "--describe")
    assert result.code == 0, result.err
    assert_golden("delegation-tokens-describe-current-user.txt", result.out)


def test_renew_then_expire_then_a_failure(broker) -> None:
    token_id, hmac = created_token(tokens(broker, "alice", "--create",
                                          "--max-life-time-period", "-1").out)
    renewed = tokens(broker, "bob", "--renew", "--hmac", hmac, "--renew-time-period", "-1")
    assert renewed.code == 1  # bob is no renewer of this one
    assert renewed.out == (f"Calling renew token operation with hmac :{hmac} , "
                           "renew-time-period :-1\n")
    assert_golden("delegation-tokens-renew-refused.txt", renewed.err)
    renewed = tokens(broker, "alice", "--renew", "--hmac", hmac, "--renew-time-period", "7200000")
    assert renewed.code == 0, renewed.err
    assert_golden("delegation-tokens-renew.txt", normalise(renewed.out, hmac=hmac))
    [token] = [t for t in described(broker, "alice", "alice") if t.token_id == token_id]
    assert renewed.out.endswith(utc(token.expiry_timestamp))  # Kafka prints no newline
    expired = tokens(broker, "alice", "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
    assert expired.code == 0, expired.err
    assert_golden("delegation-tokens-expire.txt", normalise(expired.out, hmac=hmac))
    again = tokens(broker, "alice", "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
    assert again.code == 1
    assert "DelegationTokenNotFoundException: Delegation Token is not found on server." in (
        again.err)


def test_token_requests_over_plaintext_are_refused(broker) -> None:
    result = run(SCRIPT, "--bootstrap-server", broker["plain"], "--command-config",
                 broker["plaintext"], "--create", "--max-life-time-period", "-1")
    assert result.code == 1
    assert result.out == ("Calling create token operation with renewers :[] , "
                          "max-life-time-period :-1\n")
    assert_golden("delegation-tokens-plaintext-refused.txt", result.err)


@pytest.mark.parametrize("args,message", [
    ([], "This tool helps to create, renew, expire, or describe delegation tokens."),
    (["--describe", "--create"], "Command must include exactly one action: --create, "
                                 "--renew, --expire or --describe"),
    (["--create"], 'Missing required argument "[max-life-time-period]"'),
    (["--renew", "--hmac", "x"], 'Missing required argument "[renew-time-period]"'),
    (["--create", "--max-life-time-period", "-1", "--hmac", "x"],
     'Option "[create]" can\'t be used with option "[hmac]"'),
    (["--describe", "--hmac", "x"], 'Option "[describe]" can\'t be used with option "[hmac]"'),
])
def test_command_line_errors_print_kafkas_message_and_the_usage(
        broker, args: list[str], message: str) -> None:
    full = ["--bootstrap-server", broker["sasl"], "--command-config", broker["configs"]["alice"],
            *args] if args else []
    result = run(SCRIPT, *full)
    assert result.code == 1
    assert result.out == ""
    assert result.err.startswith(message + "\n")
    assert "--max-life-time-period" in result.err  # the usage table follows


def test_a_tool_logs_in_with_a_token_but_may_not_manage_tokens(broker, tmp_path) -> None:
    token_id, hmac = created_token(tokens(broker, "alice", "--create",
                                          "--max-life-time-period", "-1").out)
    config = tmp_path / "token.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                      f'required username="{token_id}" password="{hmac}" tokenauth="true";\n')
    result = run(SCRIPT, "--bootstrap-server", broker["sasl"], "--command-config", str(config),
                 "--describe", "--owner-principal", "User:alice")
    assert result.code == 1  # the login worked; the request is refused (64)
    assert "UnsupportedByAuthenticationException" in result.err, result.err
