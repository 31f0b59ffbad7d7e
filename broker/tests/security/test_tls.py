"""TLS contexts from Kafka's ssl.* keys, checked with real handshakes on 127.0.0.1, and the
principal of a connection (Kafka's ssl.principal.mapping.rules over Java's RFC 2253 DN)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID
from tls_material import (
    SERVER_NAMES,
    SERVER_SUBJECT,
    JksStores,
    TlsMaterial,
    make_jks_stores,
    make_tls_material,
)

from moldau.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    PrincipalMappingError,
    SslPrincipalMapper,
    peer_principal,
    principal_from_certificate,
)
from moldau.security.ssl_settings import TlsConfigError, listener_settings
from moldau.security.tls import TlsContextHolder, build_client_context, build_server_context
from moldau.security.x500 import distinguished_name

T = TypeVar("T")
TIMEOUT = 5.0


@pytest.fixture(scope="session")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    """A second, unrelated CA with its own server and client certificates."""
    return make_tls_material(tmp_path_factory.mktemp("tls-other"))


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro_fn(), TIMEOUT)
    return asyncio.run(bounded())


# ---------------------------------------------------------------------------- a TLS echo server


@asynccontextmanager
async def serve(context: ssl.SSLContext, rules: str = "DEFAULT") -> AsyncIterator[int]:
    """A TLS server on 127.0.0.1 that first writes the peer's principal, then echoes lines."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            principal = peer_principal(writer.get_extra_info("ssl_object"), rules)
            writer.write(f"{principal}\n".encode())
            while line := await reader.readline():
                writer.write(line)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.ssl_object: ssl.SSLObject = writer.get_extra_info("ssl_object")

    @property
    def server_cert(self) -> x509.Certificate:
        return x509.load_der_x509_certificate(self.ssl_object.getpeercert(binary_form=True))

    async def echo(self, text: str) -> str:
        self.writer.write(text.encode() + b"\n")
        await self.writer.drain()
        return (await self.reader.readline()).decode().rstrip("\n")

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await self.writer.wait_closed()


async def connect(port: int, context: ssl.SSLContext,
                  host: str = "localhost") -> tuple[Conn, str]:
    """Connect, complete the handshake and read the principal the server saw.
    With TLS 1.3 a rejected client certificate shows up here, on the first read."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context,
                                                   server_hostname=host)
    conn = Conn(reader, writer)
    try:
        line = await reader.readline()
    except (ConnectionError, ssl.SSLError):
        line = b""
    return conn, line.decode().rstrip("\n")


async def principal_seen(server: ssl.SSLContext, client: ssl.SSLContext,
                         rules: str = "DEFAULT") -> str:
    async with serve(server, rules) as port:
        conn, principal = await connect(port, client)
        await conn.close()
        return principal


def client_ctx(tls: TlsMaterial, with_cert: bool = True, **extra: str) -> ssl.SSLContext:
    return build_client_context({**tls.client_settings(with_cert), **extra})


def pem_text(path: Path) -> str:
    return path.read_text()


def expect_error(key: str, settings: dict[str, Any], *fragments: str,
                 server: bool = True) -> TlsConfigError:
    build = build_server_context if server else build_client_context
    with pytest.raises(TlsConfigError) as info:
        build(settings)
    assert info.value.key == key
    assert str(info.value).startswith(key + ":")
    for fragment in fragments:
        assert fragment in str(info.value)
    return info.value


# ---------------------------------------------------------------------------- key stores


def test_pem_key_store_by_location(tls: TlsMaterial) -> None:
    context = build_server_context(tls.server_settings("PEM"))
    assert run(lambda: principal_seen(context, client_ctx(tls))) == "User:ANONYMOUS"


def test_pem_by_location_with_unencrypted_key(tls: TlsMaterial, tmp_path: Path) -> None:
    # Kafka insists on ssl.key.password for a PEM file; Moldau also takes a plain key
    store = tmp_path / "plain.pem"
    store.write_bytes(tls.server_key.read_bytes() + tls.server_cert.read_bytes())
    context = build_server_context({"ssl.keystore.type": "PEM",
                                    "ssl.keystore.location": str(store)})
    assert run(lambda: principal_seen(context, client_ctx(tls))) == "User:ANONYMOUS"


def test_pem_inline_in_config(tls: TlsMaterial) -> None:
    settings = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": pem_text(tls.server_key),
        "ssl.keystore.certificate.chain": pem_text(tls.server_cert),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": pem_text(tls.ca_cert),
        "ssl.client.auth": "required",
    }
    context = build_server_context(settings)
    assert run(lambda: principal_seen(context, client_ctx(tls))) == f"User:{tls.client_dn}"
    client = build_client_context({k: v for k, v in settings.items() if k != "ssl.client.auth"})
    assert run(lambda: principal_seen(context, client)) == f"User:{tls.server_dn}"


def test_pkcs12_with_password(tls: TlsMaterial) -> None:
    context = build_server_context(tls.server_settings("PKCS12", client_auth="required"))
    assert run(lambda: principal_seen(context, client_ctx(tls))) == f"User:{tls.client_dn}"


def test_pkcs12_under_kafkas_default_jks_type(tls: TlsMaterial) -> None:
    # Java 9+ opens a PKCS12 file as type JKS (keystore.type.compat); so does Moldau
    settings = {"ssl.keystore.location": str(tls.server_p12),
                "ssl.keystore.password": tls.store_password,
                "ssl.truststore.location": str(tls.truststore_p12),
                "ssl.truststore.password": tls.store_password}
    context = build_server_context(settings)
    assert run(lambda: principal_seen(context, client_ctx(tls))) == "User:ANONYMOUS"


def test_wrong_pkcs12_password_names_the_key(tls: TlsMaterial) -> None:
    settings = {**tls.server_settings("PKCS12"), "ssl.keystore.password": "wrong"}
    expect_error("ssl.keystore.password", settings, "wrong password", str(tls.server_p12))
    settings = {**tls.server_settings("PKCS12"), "ssl.truststore.password": "wrong"}
    expect_error("ssl.truststore.password", settings, "wrong password")
    del settings["ssl.truststore.password"]  # Java would skip the integrity check; we cannot
    expect_error("ssl.truststore.password", settings, "without a password")


def test_missing_pkcs12_password(tls: TlsMaterial) -> None:
    settings = tls.server_settings("PKCS12")
    del settings["ssl.keystore.password"]
    expect_error("ssl.keystore.password", settings)


def test_pem_key_password_errors(tls: TlsMaterial) -> None:
    settings = {**tls.server_settings("PEM"), "ssl.key.password": "wrong"}
    expect_error("ssl.key.password", settings, "wrong password")
    settings = tls.server_settings("PEM")
    del settings["ssl.key.password"]
    expect_error("ssl.key.password", settings, "encrypted")
    settings = {**tls.server_settings("PEM"), "ssl.keystore.password": "x"}
    expect_error("ssl.keystore.password", settings, "ssl.key.password")


@pytest.fixture(scope="module")
def jks_stores(tls: TlsMaterial) -> JksStores:
    return make_jks_stores(tls)


def jks_settings(stores: JksStores) -> dict[str, str]:
    return {"ssl.keystore.location": str(stores.keystore),
            "ssl.keystore.password": stores.store_password,
            "ssl.key.password": stores.key_password,
            "ssl.truststore.location": str(stores.truststore),
            "ssl.truststore.password": stores.trust_password,
            "ssl.client.auth": "required"}


@pytest.mark.parametrize("store_type", ["JKS", "PKCS12", None])
def test_keytool_jks_stores_serve_mutual_tls(tls: TlsMaterial, jks_stores: JksStores,
                                             store_type: str | None) -> None:
    # Kafka's default type; like Java 9+, the PKCS12 type opens a JKS file too.
    settings = jks_settings(jks_stores)
    if store_type:
        settings |= {"ssl.keystore.type": store_type, "ssl.truststore.type": store_type}
    context = build_server_context(settings)
    assert run(lambda: principal_seen(context, client_ctx(tls))) == f"User:{tls.client_dn}"


def test_jks_trust_store_opens_without_a_password(tls: TlsMaterial,
                                                  jks_stores: JksStores) -> None:
    # Java skips a trust store's integrity check when no password is given.
    settings = jks_settings(jks_stores)
    del settings["ssl.truststore.password"]
    context = build_server_context(settings)
    assert run(lambda: principal_seen(context, client_ctx(tls))) == f"User:{tls.client_dn}"


def test_jks_errors_name_the_key(tls: TlsMaterial, jks_stores: JksStores,
                                 tmp_path: Path) -> None:
    settings = jks_settings(jks_stores)
    expect_error("ssl.keystore.password", {**settings, "ssl.keystore.password": "wrong"},
                 "integrity check failed", str(jks_stores.keystore))
    expect_error("ssl.truststore.password", {**settings, "ssl.truststore.password": "wrong"},
                 "integrity check failed")
    expect_error("ssl.key.password", {**settings, "ssl.key.password": "wrong"},
                 "opens the private key")
    as_keystore = {**settings, "ssl.keystore.location": str(jks_stores.truststore),
                   "ssl.keystore.password": jks_stores.trust_password}
    expect_error("ssl.keystore.location", as_keystore, "no private key entry")
    damaged = tmp_path / "damaged.jks"
    data = bytearray(jks_stores.keystore.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    expect_error("ssl.keystore.password", {**settings, "ssl.keystore.location": str(damaged)},
                 "damaged")
    expect_error("ssl.keystore.password", {**settings, "ssl.keystore.location": str(tls.jks)},
                 "cannot open the JKS store")


def test_jceks_store_gets_the_keytool_command(tls: TlsMaterial, tmp_path: Path) -> None:
    jceks = tmp_path / "server.jceks"
    jceks.write_bytes(b"\xce\xce\xce\xce\x00\x00\x00\x02" + b"\x00" * 64)
    settings = {"ssl.keystore.location": str(jceks), "ssl.keystore.password": "x"}
    error = expect_error("ssl.keystore.location", settings, "JCEKS")
    assert (f"keytool -importkeystore -srckeystore {jceks} -srcstoretype JCEKS "
            f"-destkeystore {jceks.with_suffix('.p12')} -deststoretype PKCS12") in str(error)


def test_key_store_consistency_errors(tls: TlsMaterial, tmp_path: Path) -> None:
    inline = {"ssl.keystore.key": pem_text(tls.server_key),
              "ssl.keystore.certificate.chain": pem_text(tls.server_cert)}
    expect_error("ssl.keystore.type", {**inline, "ssl.keystore.type": "PKCS12"}, "PEM")
    expect_error("ssl.keystore.certificate.chain",
                 {"ssl.keystore.type": "PEM", "ssl.keystore.key": pem_text(tls.server_key)})
    expect_error("ssl.keystore.location", {**inline, "ssl.keystore.type": "PEM",
                                           "ssl.keystore.location": str(tls.server_p12)})
    expect_error("ssl.keystore.location", {}, "needs a key store")
    expect_error("ssl.keystore.location", {"ssl.keystore.location": str(tmp_path / "none.p12"),
                                           "ssl.keystore.password": "x"}, "cannot read")
    # a key that is not the certificate's
    expect_error("ssl.keystore.key", {"ssl.keystore.type": "PEM",
                                      "ssl.keystore.key": pem_text(tls.client_key),
                                      "ssl.keystore.certificate.chain": pem_text(tls.server_cert)},
                 "does not belong")
    # a PEM file under a PKCS12 type, and an unsupported type
    expect_error("ssl.keystore.type", {"ssl.keystore.type": "PKCS12",
                                       "ssl.keystore.location": str(tls.server_keystore_pem),
                                       "ssl.keystore.password": "x"}, "PEM")
    expect_error("ssl.keystore.type", {"ssl.keystore.type": "BCFKS",
                                       "ssl.keystore.location": str(tls.server_p12),
                                       "ssl.keystore.password": "x"}, "PKCS12 and PEM")


def test_other_setting_errors(tls: TlsMaterial) -> None:
    base = tls.server_settings("PKCS12")
    expect_error("ssl.client.auth", {**base, "ssl.client.auth": "sometimes"})
    expect_error("ssl.enabled.protocols", {**base, "ssl.enabled.protocols": "TLSv1.4"})
    expect_error("ssl.enabled.protocols", {**base, "ssl.enabled.protocols": ["TLSv1.1"]})
    expect_error("ssl.protocol", {**base, "ssl.protocol": "QUIC"})
    expect_error("ssl.cipher.suites", {**base, "ssl.cipher.suites": "TLS_FANCY_NEW_SUITE"})
    expect_error("ssl.endpoint.identification.algorithm",
                 {**tls.client_settings(), "ssl.endpoint.identification.algorithm": "ldaps"},
                 server=False)


# ---------------------------------------------------------------------------- client auth


def test_client_auth_required(tls: TlsMaterial) -> None:
    context = build_server_context(tls.server_settings("PEM", client_auth="required"))
    assert context.verify_mode == ssl.CERT_REQUIRED

    async def scenario() -> tuple[str, str]:
        async with serve(context) as port:
            try:
                conn, without = await connect(port, client_ctx(tls, with_cert=False))
                await conn.close()
            except (ConnectionError, ssl.SSLError):
                without = ""
            conn, with_cert = await connect(port, client_ctx(tls))
            assert await conn.echo("ping") == "ping"
            await conn.close()
            return without, with_cert

    without, with_cert = run(scenario)
    assert without == ""  # rejected: the server never got to say who it was talking to
    assert with_cert == f"User:{tls.client_dn}"


def test_client_auth_required_rejects_a_certificate_from_another_ca(
        tls: TlsMaterial, other_ca: TlsMaterial) -> None:
    context = build_server_context(tls.server_settings("PKCS12", client_auth="required"))
    stranger = build_client_context({"ssl.truststore.type": "PEM",
                                     "ssl.truststore.location": str(tls.ca_cert),
                                     "ssl.keystore.type": "PKCS12",
                                     "ssl.keystore.location": str(other_ca.client_p12),
                                     "ssl.keystore.password": other_ca.store_password})
    assert run(lambda: principal_seen(context, stranger)) == ""


def test_client_auth_requested(tls: TlsMaterial) -> None:
    context = build_server_context(tls.server_settings("PKCS12", client_auth="requested"))
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert run(lambda: principal_seen(context, client_ctx(tls, with_cert=False))) \
        == "User:ANONYMOUS"
    assert run(lambda: principal_seen(context, client_ctx(tls))) == f"User:{tls.client_dn}"


def test_client_auth_none_ignores_the_client_certificate(tls: TlsMaterial) -> None:
    context = build_server_context(tls.server_settings("PKCS12"))
    assert context.verify_mode == ssl.CERT_NONE
    assert run(lambda: principal_seen(context, client_ctx(tls))) == "User:ANONYMOUS"


def test_principal_mapping_over_a_real_handshake(tls: TlsMaterial) -> None:
    context = build_server_context(tls.server_settings("PKCS12", client_auth="required"))
    rules = "RULE:^CN=([^,]*),OU=eng,.*$/$1@ENG/L,DEFAULT"
    assert run(lambda: principal_seen(context, client_ctx(tls), rules)) == "User:alice@eng"


# ---------------------------------------------------------------- protocols, ciphers, host names


async def negotiated(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[str, str]:
    async with serve(server) as port:
        conn, _ = await connect(port, client)
        version, cipher = conn.ssl_object.version(), conn.ssl_object.cipher()[0]
        await conn.close()
        return version or "", cipher


def test_tls12_only_and_tls13_only(tls: TlsMaterial) -> None:
    base = tls.server_settings("PKCS12")
    only12 = build_server_context({**base, "ssl.enabled.protocols": "TLSv1.2"})
    only13 = build_server_context({**base, "ssl.enabled.protocols": ["TLSv1.3"]})
    assert run(lambda: negotiated(only12, client_ctx(tls)))[0] == "TLSv1.2"
    assert run(lambda: negotiated(only13, client_ctx(tls)))[0] == "TLSv1.3"
    client13 = client_ctx(tls, **{"ssl.enabled.protocols": "TLSv1.3"})
    with pytest.raises((ssl.SSLError, ConnectionError)):  # OpenSSL alerts or resets
        run(lambda: negotiated(only12, client13))
    # ssl.protocol=TLSv1.2 keeps a client at TLS 1.2 even with TLSv1.3 enabled
    default = build_server_context(base)
    capped = client_ctx(tls, **{"ssl.protocol": "TLSv1.2"})
    assert run(lambda: negotiated(default, capped))[0] == "TLSv1.2"
    # the server ignores the legacy protocols that modern JVMs disable too
    legacy = build_server_context({**base, "ssl.enabled.protocols": "TLSv1.1,TLSv1.2"})
    assert legacy.minimum_version == legacy.maximum_version == ssl.TLSVersion.TLSv1_2


def test_cipher_suites_by_iana_name(tls: TlsMaterial) -> None:
    base = tls.server_settings("PKCS12")
    server = build_server_context(
        {**base, "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"})
    # only a TLS 1.2 suite listed: TLS 1.3 is off, as in JSSE
    assert run(lambda: negotiated(server, client_ctx(tls))) \
        == ("TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
    server = build_server_context(
        {**base, "ssl.cipher.suites": ["ECDHE-ECDSA-AES256-GCM-SHA384"]})  # OpenSSL name
    assert run(lambda: negotiated(server, client_ctx(tls)))[1] == "ECDHE-ECDSA-AES256-GCM-SHA384"
    server = build_server_context({**base, "ssl.cipher.suites": "TLS_AES_256_GCM_SHA384,"
                                   "TLS_AES_128_GCM_SHA256,TLS_CHACHA20_POLY1305_SHA256"})
    assert run(lambda: negotiated(server, client_ctx(tls)))[0] == "TLSv1.3"


def test_client_host_name_check(tls: TlsMaterial, other_ca: TlsMaterial) -> None:
    server = build_server_context(tls.server_settings("PKCS12"))
    checking = client_ctx(tls)  # Kafka's default: https
    assert checking.check_hostname

    async def to(client: ssl.SSLContext, host: str) -> str:
        async with serve(server) as port:
            conn, principal = await connect(port, client, host)
            await conn.close()
            return principal

    assert run(lambda: to(checking, "127.0.0.1")) == "User:ANONYMOUS"  # SAN IP
    with pytest.raises(ssl.SSLCertVerificationError):
        run(lambda: to(checking, "broker.elsewhere.example"))
    unchecked = client_ctx(tls, **{"ssl.endpoint.identification.algorithm": ""})
    assert not unchecked.check_hostname
    assert run(lambda: to(unchecked, "broker.elsewhere.example")) == "User:ANONYMOUS"
    # the chain is checked regardless
    strangers = build_client_context({"ssl.truststore.type": "PEM",
                                      "ssl.truststore.location": str(other_ca.ca_cert),
                                      "ssl.endpoint.identification.algorithm": ""})
    with pytest.raises(ssl.SSLCertVerificationError):
        run(lambda: to(strangers, "localhost"))


def test_listener_overrides() -> None:
    values = {"ssl.keystore.location": "/base.p12", "ssl.client.auth": "none",
              "listener.name.internal.ssl.keystore.location": "/internal.p12",
              "listener.name.internal.ssl.client.auth": "required",
              "listener.name.external.ssl.keystore.location": "/external.p12",
              "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
              "log.dirs": "/data"}
    assert listener_settings(values, "INTERNAL") == {
        "ssl.keystore.location": "/internal.p12", "ssl.client.auth": "required"}
    assert listener_settings(values, "SSL") == {
        "ssl.keystore.location": "/base.p12", "ssl.client.auth": "none"}


# ---------------------------------------------------------------------------- reload


def pem_key_store(key: Path, cert: Path) -> dict[str, Any]:
    """Settings that replace the key store with inline PEM (and clear the file form)."""
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": None,
            "ssl.keystore.password": None, "ssl.key.password": None,
            "ssl.keystore.key": key.read_text(),
            "ssl.keystore.certificate.chain": cert.read_text()}


def test_reload_swaps_the_context_for_new_connections(tls: TlsMaterial) -> None:
    holder = TlsContextHolder(tls.server_settings("PKCS12"))
    first = holder.context
    old_serial = x509.load_pem_x509_certificate(tls.server_cert.read_bytes()).serial_number
    key_b, cert_b = tls.issue("server-b", SERVER_SUBJECT, SERVER_NAMES, server=True)
    new_serial = x509.load_pem_x509_certificate(cert_b.read_bytes()).serial_number

    async def scenario() -> None:
        async with serve(holder.listener_context) as port:
            before, _ = await connect(port, client_ctx(tls))
            assert before.server_cert.serial_number == old_serial

            holder.reload(pem_key_store(key_b, cert_b))
            assert holder.context is not first and holder.generation == 1
            after, _ = await connect(port, client_ctx(tls))
            assert after.server_cert.serial_number == new_serial
            # the established connection keeps its session and still works
            assert await before.echo("still here") == "still here"
            assert before.server_cert.serial_number == old_serial

            # a bad reload raises and changes nothing
            current = holder.context
            bad = {**tls.server_settings("PKCS12"), "ssl.keystore.key": None,
                   "ssl.keystore.certificate.chain": None, "ssl.keystore.password": "wrong"}
            with pytest.raises(TlsConfigError) as info:
                holder.reload(bad)
            assert info.value.key == "ssl.keystore.password"
            assert holder.context is current and holder.generation == 1
            later, _ = await connect(port, client_ctx(tls))
            assert later.server_cert.serial_number == new_serial
            for conn in (before, after, later):
                await conn.close()

    run(scenario)


def test_reload_refuses_subject_and_san_changes_unless_allowed(tls: TlsMaterial) -> None:
    holder = TlsContextHolder(tls.server_settings("PKCS12"))
    original = holder.context
    other_dn = (("C", "US"), ("O", "acme"), ("OU", "brokers"), ("CN", "broker-2"))
    key_c, cert_c = tls.issue("server-c", other_dn, SERVER_NAMES, server=True)
    with pytest.raises(TlsConfigError, match=r"ssl\.allow\.dn\.changes"):
        holder.reload(pem_key_store(key_c, cert_c))
    key_d, cert_d = tls.issue("server-d", SERVER_SUBJECT, ("localhost",), server=True)
    with pytest.raises(TlsConfigError, match=r"ssl\.allow\.san\.changes"):
        holder.reload(pem_key_store(key_d, cert_d))
    assert holder.context is original
    holder.reload({**pem_key_store(key_c, cert_c), "ssl.allow.dn.changes": "true"})
    assert holder.context is not original
    # a key store cannot be dropped from a listener
    with pytest.raises(TlsConfigError, match="needs a key store"):
        holder.reload({"ssl.keystore.key": None, "ssl.keystore.certificate.chain": None})


def test_reload_applies_only_the_store_settings(tls: TlsMaterial) -> None:
    holder = TlsContextHolder(tls.server_settings("PKCS12", client_auth="required"))
    # keys absent from the update keep their values: None clears the PKCS12 passwords
    holder.reload({**tls.server_settings("PEM"), "ssl.keystore.password": None,
                   "ssl.truststore.password": None, "ssl.client.auth": "none",
                   "ssl.enabled.protocols": "TLSv1.3"})
    assert holder.settings["ssl.client.auth"] == "required"  # not reconfigurable in Kafka
    assert holder.settings["ssl.keystore.type"] == "PEM"
    assert holder.context.verify_mode == ssl.CERT_REQUIRED


def test_reloaded_trust_store_applies_to_new_handshakes(
        tls: TlsMaterial, other_ca: TlsMaterial) -> None:
    holder = TlsContextHolder(tls.server_settings("PEM", client_auth="required"))

    def client_of(material: TlsMaterial) -> ssl.SSLContext:
        return build_client_context({"ssl.truststore.type": "PEM",
                                     "ssl.truststore.location": str(tls.ca_cert),
                                     "ssl.keystore.type": "PKCS12",
                                     "ssl.keystore.location": str(material.client_p12),
                                     "ssl.keystore.password": material.store_password})

    async def scenario() -> tuple[str, str, str]:
        async with serve(holder.listener_context) as port:
            conn, ours = await connect(port, client_of(tls))
            await conn.close()
            holder.reload({"ssl.truststore.type": "PEM",
                           "ssl.truststore.location": str(other_ca.ca_cert)})
            conn, ours_after = await connect(port, client_of(tls))
            await conn.close()
            conn, theirs_after = await connect(port, client_of(other_ca))
            await conn.close()
            return ours, ours_after, theirs_after

    ours, ours_after, theirs_after = run(scenario)
    assert ours == f"User:{tls.client_dn}"
    assert ours_after == ""  # the old CA is no longer trusted
    assert theirs_after == f"User:{other_ca.client_dn}"


def test_client_holder(tls: TlsMaterial) -> None:
    holder = TlsContextHolder(tls.client_settings(), server_side=False)
    assert holder.context.check_hostname
    with pytest.raises(TypeError):
        _ = holder.listener_context
    server = build_server_context(tls.server_settings("PKCS12", client_auth="required"))
    assert run(lambda: principal_seen(server, holder.context)) == f"User:{tls.client_dn}"


# ---------------------------------------------------------------------------- principals


def test_kafka_principal() -> None:
    assert str(KafkaPrincipal("alice")) == "User:alice"
    assert str(KafkaPrincipal(type="Group", name="ops")) == "Group:ops"
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert principal_from_certificate(None, "DEFAULT") == "ANONYMOUS"
    assert principal_from_certificate(b"", "RULE:.*/x/") == "ANONYMOUS"
    assert peer_principal(None) == ANONYMOUS


KAFKA_RULES = ", ".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
])


@pytest.mark.parametrize(("dn", "name"), [
    # Kafka's SslPrincipalMapperTest
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_rules_in_order_falling_through(dn: str, name: str) -> None:
    assert SslPrincipalMapper(KAFKA_RULES).get_name(dn) == name


def test_rule_forms() -> None:
    def name(rules: str, dn: str = "CN=Alice,OU=Eng,O=Acme,C=US") -> str:
        return SslPrincipalMapper(rules).get_name(dn)

    assert name("DEFAULT") == "CN=Alice,OU=Eng,O=Acme,C=US"
    assert name("RULE:^CN=([^,]*),.*$/$1/") == "Alice"
    assert name("RULE:^CN=([^,]*),.*$/$1/L") == "alice"
    assert name("RULE:^CN=([^,]*),.*$/$1/U") == "ALICE"
    assert name("RULE:^CN=([^,]*),OU=([^,]*),.*$/$2\\/$1/") == "Eng/Alice"  # escaped slash
    assert name("RULE:^CN=([^,]*),.*$/\\$$1/") == "$Alice"  # escaped dollar
    assert name("RULE:^CN=(?<user>[^,]*),.*$/${user}/L") == "alice"  # Java named group
    assert name("RULE:^CN=([^,]*),.*$/$1-$2/") == "Alice-$2"  # no group 2: literal, as Kafka
    assert name("RULE:^CN=([^,]*),.*$/$0/") == "CN=Alice,OU=Eng,O=Acme,C=US"
    # no match falls through to the next rule; a partial match is no match
    assert name("RULE:^CN=Bob,.*$/bob/, RULE:CN=Alice/alice/, RULE:^.*O=(\\w+).*$/$1/") == "Acme"
    assert name("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT",
                "CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"
    with pytest.raises(PrincipalMappingError, match="No rules apply to CN=Alice"):
        name("RULE:^CN=Bob,.*$/bob/")
    with pytest.raises(PrincipalMappingError):
        name("")


@pytest.mark.parametrize(("rules", "shown"), [
    # Kafka's testRulesSplitting, "seeing is believing"
    ("", "[]"),
    ("DEFAULT", "[DEFAULT]"),
    ("RULE://", "[RULE:/]"),
    ("RULE:/.*/", "[RULE:/.*]"),
    ("RULE:/.*/L", "[RULE:/.*/L]"),
    ("RULE://,DEFAULT", "[RULE:/, DEFAULT]"),
    ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
    ("  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"),
    ("  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"),
    ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
     "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"),
    (",   , , ,      , , ,   ", "[]"),
    (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
    (",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"),
    ("     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"),
    ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]"),
    ("RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/", "[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]"),
    ("RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
     "/DEFAULT/,DEFAULT",
     "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, "
     "/DEFAULT, DEFAULT]"),
])
def test_rule_splitting(rules: str, shown: str) -> None:
    assert repr(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {shown})"


@pytest.mark.parametrize("rules", [
    # Kafka's testInvalidRules
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    # and what Python's regex or Java's replacement syntax cannot take
    "RULE:^CN=(.*$/$1/",
    "RULE:^CN=(.*)$/$x/",
    "RULE:^CN=(.*)$/${nope}/",
    "DEFAULT, RULE:a/b/ L",
])
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(TlsConfigError) as info:
        SslPrincipalMapper(rules)
    assert info.value.key == "ssl.principal.mapping.rules"


# ---------------------------------------------------------------------------- Java's RFC 2253 names

A = x509.NameAttribute
RDN = x509.RelativeDistinguishedName


def cert_der(subject: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject)
            .issuer_name(x509.Name([A(NameOID.COMMON_NAME, "issuer")]))
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


# Expected values printed by OpenJDK 17's X509Certificate.getSubjectX500Principal().getName()
# for the same certificates.
@pytest.mark.parametrize(("subject", "java"), [
    (x509.Name([A(NameOID.COUNTRY_NAME, "US"), A(NameOID.ORGANIZATION_NAME, "acme"),
                A(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"), A(NameOID.COMMON_NAME, "alice")]),
     "CN=alice,OU=eng,O=acme,C=US"),
    (x509.Name([A(NameOID.COUNTRY_NAME, "US"),
                A(NameOID.COMMON_NAME, ' #Tkac, Adam+x"y\\z; <a>=b ')]),
     'CN=\\ \\#Tkac\\, Adam\\+x\\"y\\\\z\\; \\<a\\>\\=b\\ ,C=US'),
    (x509.Name([A(NameOID.ORGANIZATION_NAME, "acme"),
                A(NameOID.EMAIL_ADDRESS, "alice@acme.com"), A(NameOID.COMMON_NAME, "alice")]),
     "CN=alice,1.2.840.113549.1.9.1=#160e616c6963654061636d652e636f6d,O=acme"),
    (x509.Name([RDN([A(NameOID.DOMAIN_COMPONENT, "com")]),
                RDN([A(NameOID.DOMAIN_COMPONENT, "acme")]),
                RDN([A(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"), A(NameOID.COMMON_NAME, "bob"),
                     A(NameOID.USER_ID, "b1")])]),
     "CN=bob+OU=eng+UID=b1,DC=acme,DC=com"),
    (x509.Name([A(NameOID.STATE_OR_PROVINCE_NAME, "MD"), A(NameOID.LOCALITY_NAME, "Fulton"),
                A(NameOID.STREET_ADDRESS, "1 Main St"), A(NameOID.SERIAL_NUMBER, "1234"),
                A(NameOID.TITLE, "boss"), A(NameOID.GIVEN_NAME, "Al")]),
     "2.5.4.42=#0c02416c,2.5.4.12=#0c04626f7373,2.5.4.5=#130431323334,STREET=1 Main St,"
     "L=Fulton,ST=MD"),
    (x509.Name([A(NameOID.ORGANIZATION_NAME, "Ünïcødé 日本", _type=_ASN1Type.BMPString),
                A(NameOID.COMMON_NAME, "café 😀"),
                A(NameOID.ORGANIZATIONAL_UNIT_NAME, "plain", _type=_ASN1Type.IA5String),
                A(NameOID.LOCALITY_NAME, "t61", _type=_ASN1Type.T61String)]),
     # Java 17 decodes a BMPString's bytes as UTF-8 too
     "L=t61,OU=plain,CN=café 😀,O=\\00\ufffd\\00n\\00\ufffd\\00c\\00\ufffd\\00d\\00\ufffd\\00"
     " e\ufffdg\\,"),
    (x509.Name([A(NameOID.COMMON_NAME, "a\x00b\r")]), "CN=a\\00b\\\r"),
    (x509.Name([A(NameOID.COMMON_NAME, "   ")]), "CN=\\ \\ \\ "),
    (x509.Name([A(NameOID.COMMON_NAME, "x", _type=_ASN1Type.UniversalString)]),
     "CN=#1c0400000078"),
    (x509.Name([]), ""),
])
def test_distinguished_name_as_java_writes_it(subject: x509.Name, java: str) -> None:
    der = cert_der(subject)
    assert distinguished_name(der) == java
    if java:
        assert principal_from_certificate(der, "DEFAULT") == java
