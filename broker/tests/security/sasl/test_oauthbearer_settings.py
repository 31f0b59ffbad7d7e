"""OAUTHBEARER settings as Moldau resolves them: a broker listener's validator from
server.properties (sasl_listeners), each setting it cannot honour stopping startup with
its key named, and a client's login from Kafka's or librdkafka's properties
(client.security), including the client-credentials grant against a token endpoint."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from moldau.client.security import ClientConfigError, client_security, librdkafka_settings
from moldau.security.sasl.oauthbearer import OAuthBearerClient, OAuthBearerServer
from moldau.security.sasl.oauthbearer_jwks import FileJwks, JwtValidator
from moldau.security.sasl.oauthbearer_login import (
    EndpointLogin,
    OAuthBearerLoginError,
    UnsecuredLogin,
)
from moldau.security.sasl.oauthbearer_unsecured import (
    UnsecuredJwsValidator,
    UnsecuredValidatorOptions,
)
from moldau.server.config import BrokerConfig
from moldau.server.config.errors import ConfigError
from moldau.server.sasl_listeners import inter_broker_sasl, sasl_listeners

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
HANDLER_KEY = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def jwks_file(tmp_path: Path, key: rsa.RSAPrivateKey) -> Path:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [{**public, "kid": "k"}]}))
    return path


def broker_config(**extra: str) -> BrokerConfig:
    props = {"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1", "log.dirs": "/tmp/x",
             "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
             "sasl.enabled.mechanisms": "OAUTHBEARER",
             "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                 f'{MODULE} required unsecuredLoginStringClaim_sub="broker";'}
    props.update(extra)
    return BrokerConfig.from_properties({k: v for k, v in props.items() if v != "-"})


# ---------------------------------------------------------------------------- broker


def test_the_default_is_the_unsecured_validator_with_its_jaas_options() -> None:
    config = broker_config(**{
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            f'{MODULE} required unsecuredValidatorRequiredScope="kafka" '
            'unsecuredValidatorAllowableClockSkewMs="2000";'})
    validator = sasl_listeners(config, "")["SASL_PLAINTEXT"].oauthbearer
    assert isinstance(validator, UnsecuredJwsValidator)
    assert validator.options.required_scope == ("kafka",)
    assert validator.options.allowable_clock_skew_ms == 2000


@pytest.mark.parametrize("handler", [VALIDATOR, VALIDATOR.replace(".OAuth", ".secured.OAuth")])
def test_kafkas_validator_class_reads_the_jwks_and_settings(jwks_file: Path, handler: str,
                                                            key: rsa.RSAPrivateKey) -> None:
    config = broker_config(**{
        HANDLER_KEY: handler,
        "sasl.oauthbearer.jwks.endpoint.url": "file:///nowhere",  # overridden below
        "listener.name.sasl_plaintext.sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
        "sasl.oauthbearer.expected.audience": "a,b", "sasl.oauthbearer.expected.issuer": "me",
        "sasl.oauthbearer.clock.skew.seconds": "5", "sasl.oauthbearer.sub.claim.name": "email"})
    listener = sasl_listeners(config, "")["SASL_PLAINTEXT"]
    validator = listener.oauthbearer
    assert isinstance(validator, JwtValidator) and isinstance(validator.keys, FileJwks)
    settings = validator.settings
    assert (settings.expected_audiences, settings.expected_issuer, settings.clock_skew_s,
            settings.sub_claim) == (("a", "b"), "me", 5, "email")
    now = int(time.time())
    token = jwt.encode({"email": "x@y", "iat": now, "exp": now + 60, "aud": "b", "iss": "me"},
                       key, algorithm="RS256", headers={"kid": "k"})
    server = OAuthBearerServer(validator)
    assert server.evaluate(OAuthBearerClient(lambda: token).initial_response()) == b""
    assert server.authorization_id == "x@y"


@pytest.mark.parametrize("extra, key, fragment", [
    ({HANDLER_KEY: "com.example.MyHandler"}, HANDLER_KEY, "String must be one of"),
    ({"listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class": VALIDATOR,
      "sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config":
          'org.apache.kafka.common.security.plain.PlainLoginModule required;'},
     "listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class",
     "validates OAUTHBEARER tokens; Moldau runs no custom server callback handler for PLAIN"),
    ({"sasl.server.callback.handler.class": VALIDATOR}, "sasl.server.callback.handler.class",
     "Kafka ignores a server callback handler without a listener and mechanism prefix"),
    ({HANDLER_KEY: VALIDATOR}, "sasl.oauthbearer.jwks.endpoint.url", "is required by"),
    ({HANDLER_KEY: VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "ftp://x/jwks"},
     "sasl.oauthbearer.jwks.endpoint.url", 'invalid protocol (ftp); only "http", "https", '
     'and "file" protocol are supported'),
    ({HANDLER_KEY: VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "/etc/jwks.json"},
     "sasl.oauthbearer.jwks.endpoint.url", "is missing the protocol"),
    ({HANDLER_KEY: VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "file:///no/such/jwks"},
     "sasl.oauthbearer.jwks.endpoint.url", "contains a file (/no/such/jwks) that doesn't exist"),
    ({HANDLER_KEY: VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "file:///tmp"},
     "sasl.oauthbearer.jwks.endpoint.url", "that is not a file"),
    ({HANDLER_KEY: VALIDATOR,
      "sasl.oauthbearer.jwks.endpoint.url": "http://127.0.0.1:9/jwks"},
     "sasl.oauthbearer.jwks.endpoint.url", "cannot be fetched"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
      f'{MODULE} required unsecuredValidatorAllowableClockSkewMs="-5";'},
     "unsecuredValidatorAllowableClockSkewMs", "must not be negative"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
      "org.apache.kafka.common.security.plain.PlainLoginModule required;"},
     "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
     f"OAUTHBEARER needs {MODULE}"),
])
def test_settings_that_stop_startup(extra: dict[str, str], key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as raised:
        sasl_listeners(broker_config(**extra), "")
    assert key in str(raised.value) and fragment in str(raised.value)


def test_a_bad_jwks_file_stops_startup(tmp_path: Path) -> None:
    path = tmp_path / "jwks.json"
    path.write_text("[]")
    with pytest.raises(ConfigError, match='has no "keys" array'):
        sasl_listeners(broker_config(**{HANDLER_KEY: VALIDATOR,
                                        "sasl.oauthbearer.jwks.endpoint.url": path.as_uri()}),
                       "")


def test_brokers_log_in_to_each_other_with_unsecured_tokens(jwks_file: Path) -> None:
    extra = {"inter.broker.listener.name": "SASL_PLAINTEXT",
             "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}
    config = broker_config(**extra)
    listeners = sasl_listeners(config, "")
    factory = inter_broker_sasl(config, listeners)
    assert factory is not None
    validator = listeners["SASL_PLAINTEXT"].oauthbearer
    assert validator is not None
    server = OAuthBearerServer(validator)
    assert server.evaluate(factory().initial_response()) == b""
    assert server.authorization_id == "broker"
    signed = broker_config(**extra, **{HANDLER_KEY: VALIDATOR,
                                       "sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri()})
    with pytest.raises(ConfigError, match="validates signed JWTs"):
        inter_broker_sasl(signed, sasl_listeners(signed, ""))
    no_sub = broker_config(**extra, **{
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{MODULE} required;"})
    with pytest.raises(ConfigError, match="makes no token for this broker"):
        inter_broker_sasl(no_sub, sasl_listeners(no_sub, ""))


# ---------------------------------------------------------------------------- clients


def client(jaas: str | None = None, **more: str) -> dict[str, str]:
    config = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", **more}
    if jaas is not None:
        config["sasl.jaas.config"] = jaas
    return config


def test_a_client_with_unsecured_login_options() -> None:
    security = client_security(client(
        f'{MODULE} required unsecuredLoginStringClaim_sub="alice" '
        'unsecuredLoginExtension_traceId="abc";'), environ={})
    assert security.sasl_mechanism == "OAUTHBEARER" and security.sasl is not None
    server = OAuthBearerServer(UnsecuredJwsValidator(UnsecuredValidatorOptions()))
    assert server.evaluate(security.sasl().initial_response()) == b""
    assert (server.authorization_id, server.extensions) == ("alice", {"traceId": "abc"})


def test_a_client_from_a_kafka_opts_jaas_file(tmp_path: Path) -> None:
    path = tmp_path / "client.jaas"
    path.write_text(f'KafkaClient {{ {MODULE} required unsecuredLoginStringClaim_sub="z"; }};')
    environ = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={path}"}
    security = client_security(client(), environ=environ)
    assert security.sasl is not None and isinstance(security.sasl(), OAuthBearerClient)


@pytest.mark.parametrize("config, fragment", [
    (client(f"{MODULE} required;"), "No principal name in JWT claim: sub"),
    (client("org.apache.kafka.common.security.plain.PlainLoginModule required;"),
     f"sasl.mechanism OAUTHBEARER logs in with {MODULE}"),
    (client(f'{MODULE} required unsecuredLoginStringClaim_sub="a";',
            **{"sasl.login.callback.handler.class": LOGIN_HANDLER}),
     "sasl.oauthbearer.token.endpoint.url is required"),
    (client(f'{MODULE} required clientId="c";',
            **{"sasl.login.callback.handler.class": LOGIN_HANDLER,
               "sasl.oauthbearer.token.endpoint.url": "https://idp/token"}),
     "clientSecret value must be non-null"),
    (client(f'{MODULE} required;', **{"sasl.login.callback.handler.class": "a.B"}),
     "cannot run the login callback handler a.B"),
    (client(**{"sasl.oauthbearer.config": "scope=a"}), "must name the principal"),
])
def test_client_settings_that_cannot_work(config: dict[str, str], fragment: str) -> None:
    with pytest.raises(ClientConfigError) as raised:
        client_security(config, environ={})
    assert fragment in str(raised.value)


def test_librdkafka_translation_both_ways() -> None:
    unsecured = librdkafka_settings(client(
        f'{MODULE} required unsecuredLoginStringClaim_sub="alice" '
        'unsecuredLoginListClaim_scope=",read,write" unsecuredLoginLifetimeSeconds="60" '
        'unsecuredLoginExtension_traceId="t";', **{"sasl.oauthbearer.sub.claim.name": "sub"}),
        environ={})
    assert unsecured["enable.sasl.oauthbearer.unsecure.jwt"] == "true"
    assert unsecured["sasl.oauthbearer.config"] == \
        "principal=alice scope=read,write lifeSeconds=60 extension_traceId=t"
    assert "sasl.jaas.config" not in unsecured
    assert "sasl.oauthbearer.sub.claim.name" not in unsecured  # Java-only
    # and librdkafka's own settings read back as the same login
    back = client_security(client(**{"sasl.oauthbearer.config":
                                     unsecured["sasl.oauthbearer.config"]}), environ={})
    assert back.sasl is not None
    oidc = librdkafka_settings(client(
        f'{MODULE} required clientId="app" clientSecret="s3cret" scope="kafka" '
        'extension_logicalCluster="lc-1";',
        **{"sasl.login.callback.handler.class": LOGIN_HANDLER,
           "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token"}), environ={})
    assert {k: v for k, v in oidc.items() if k.startswith("sasl.oauthbearer")} == {
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "sasl.oauthbearer.client.id": "app", "sasl.oauthbearer.client.secret": "s3cret",
        "sasl.oauthbearer.scope": "kafka", "sasl.oauthbearer.extensions": "logicalCluster=lc-1"}


def test_librdkafka_cannot_take_claims_it_does_not_make() -> None:
    with pytest.raises(ClientConfigError, match="cannot carry unsecuredLoginStringClaim_iss"):
        librdkafka_settings(client(f'{MODULE} required unsecuredLoginStringClaim_sub="a" '
                                   'unsecuredLoginStringClaim_iss="me";'), environ={})


# ---------------------------------------------------------------------------- endpoint


@pytest.fixture
def token_endpoint(key: rsa.RSAPrivateKey) -> Iterator[dict[str, Any]]:
    seen: dict[str, Any] = {"requests": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            seen["requests"] += 1
            seen["form"] = parse_qs(body)
            seen["authorization"] = self.headers["Authorization"]
            now = int(time.time())
            token = jwt.encode({"sub": "svc", "iat": now, "exp": now + 3600}, key,
                               algorithm="RS256")
            answer = json.dumps({"access_token": token, "token_type": "bearer"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    seen["url"] = f"http://127.0.0.1:{server.server_address[1]}/token"
    yield seen
    server.shutdown()
    server.server_close()


def test_client_credentials_grant(token_endpoint: dict[str, Any]) -> None:
    security = client_security(client(
        f'{MODULE} required clientId="my app" clientSecret="p:w" scope="kafka write";',
        **{"sasl.login.callback.handler.class": LOGIN_HANDLER,
           "sasl.oauthbearer.token.endpoint.url": token_endpoint["url"]}), environ={})
    assert security.sasl is not None
    first, second = security.sasl(), security.sasl()
    for mechanism in (first, second):
        assert b"auth=Bearer ey" in mechanism.initial_response()
    assert token_endpoint["requests"] == 1  # kept until 80% of its lifetime
    assert token_endpoint["form"] == {"grant_type": ["client_credentials"],
                                      "scope": ["kafka write"]}
    assert token_endpoint["authorization"] == \
        "Basic " + base64.b64encode(b"my+app:p%3Aw").decode()


def test_a_token_from_a_file(tmp_path: Path, key: rsa.RSAPrivateKey) -> None:
    now = int(time.time())
    path = tmp_path / "token"
    path.write_text(jwt.encode({"sub": "f", "exp": now + 60}, key, algorithm="RS256") + "\n")
    login = EndpointLogin(path.as_uri(), None, None, None, {})
    assert login.token().count(".") == 2
    path.write_text(jwt.encode({"exp": now + 60}, key, algorithm="RS256"))
    with pytest.raises(OAuthBearerLoginError, match="sub value must be non-null"):
        EndpointLogin(path.as_uri(), None, None, None, {}).token()
    assert isinstance(UnsecuredLogin({"unsecuredLoginStringClaim_sub": "u"}).token(), str)
