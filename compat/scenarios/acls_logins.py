"""Named principals from every other kind of login on the ACL pair: the SASL mechanisms
beside SCRAM-SHA-256 (acls_sasl.py), and TLS client certificates.

`acls.sasl-mechanisms`: Kafka's AclCommand grants User:alice a producer and a consumer of
a prefixed topic and a group through ZooKeeper; Kafka's client (compat/java/AclProbe.java)
logs in with PLAIN, SCRAM-SHA-512 and OAUTHBEARER (Kafka's unsecured tokens) as alice
(allowed), as bob (no ACL: refused), and with a wrong password, an unknown user or a bad
token (refused at login).

`acls.sasl-gssapi`: the same grants for alice, and the probe logged in with GSSAPI as alice
and bob, with keytabs of the KDC the lab starts (compat/acl_kerberos.py), and as carol of
a trusted foreign realm, whose name no rule maps.

`acls.tls-principals`: on the pair's SSL listener (compat/acl_tls.py: a client certificate
required, `CN=<name>,OU=mapped,...` mapped to the lower-cased name, every other name
whole), ACLs on certificates' names, the mapped short name and a name the mapping hides;
the probe with each certificate says which principal the broker saw (`whoami`) and what it
may do; a certificate from an untrusted CA and none at all fail the handshake. On the
STRICT listener, whose rules map carol's name alone, carol is User:carol and alice's name
maps to nothing. On the
SASL_SSL listener alice logs in with SCRAM without a certificate (the broker-wide
`ssl.client.auth=required` does not apply there) and with carol's: she is User:alice."""

from __future__ import annotations

from collections.abc import Mapping

from compat import acl_kerberos, acl_oauth, acl_setup, acl_tls
from compat.acl_setup import ACL_COMMAND
from compat.lab import ACL_PAIR
from compat.scenarios.acl_output import STDOUT_FRAMES, sort_acl_blocks
from compat.scenarios.acls_zookeeper import PROBE, batch_transcript
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side, lab_broker
from compat.scenarios.tool_steps import SCRATCH_RULE, write
from compat.transcript import Transcript
from moldau import properties as java_properties

ALLOWED = ("whoami", "describe", "produce", "produce-idempotent", "consume", "commit",
           "describe-group")
REFUSED = ("whoami", "describe", "produce", "consume", "commit", "describe-group")
# An AdminClient's call ends after 5 s instead of 60 (its requests' own timeout must not
# be longer)
SHORT_TIMEOUTS = {"default.api.timeout.ms": "5000", "request.timeout.ms": "2000"}

# OAUTHBEARER logins: the options of Kafka's unsecured login module
ALICE_TOKEN = {"unsecuredLoginStringClaim_sub": "alice"}
BOB_TOKEN = {"unsecuredLoginStringClaim_sub": "bob"}
BAD_TOKENS: Mapping[str, Mapping[str, str]] = {
    # the principal in another claim: the broker's validator wants `sub`
    "token-without-sub": {"unsecuredLoginPrincipalClaimName": "user",
                          "unsecuredLoginStringClaim_user": "alice"},
    # a token that expired an hour before it was made
    "token-expired": {"unsecuredLoginStringClaim_sub": "alice",
                      "unsecuredLoginLifetimeSeconds": "-3600"},
}


def _address(ctx: Context, listener: str) -> str:
    return acl_setup.listener_address(lab_broker(ctx.lab, ctx.pair, ctx.broker), listener)


def _login(ctx: Context, name: str, props: Mapping[str, str], listener: str) -> str:
    """AclProbe's BOOTSTRAP with a login file: FILE.properties@HOST:PORT."""
    path = write(ctx, f"{name}.properties", java_properties.dumps(dict(props)))
    return f"{path}@{_address(ctx, listener)}"


def mechanisms(ctx: Context) -> Transcript:
    """One JVM: AclCommand's grants through ZooKeeper, then the probe per login."""
    prefix = f"acl-{ctx.token}-mech-"
    topic, group = f"{prefix}orders", f"{prefix}readers"
    zookeeper = acl_setup.zookeeper_args(ctx.zookeeper_connect)
    prefixed = ["--topic", prefix, "--resource-pattern-type", "prefixed"]
    pki = acl_tls.LabPki(ctx.lab.directory / acl_tls.PKI_DIR)
    oauth = acl_oauth.LabOAuth(ctx.lab.directory / acl_oauth.OAUTH_DIR)

    def sasl(name: str, props: Mapping[str, str]) -> str:
        return _login(ctx, name, props, acl_setup.SASL_LISTENER)

    def signed(token: str) -> str:
        props = {**pki.client_properties(None), **oauth.client_properties(token),
                 "security.protocol": acl_tls.SASL_SSL_LISTENER}
        return _login(ctx, f"signed-{token}", props, acl_tls.SASL_SSL_LISTENER)

    def password_login(user: str, mechanism: str, password: str | None = None) -> str:
        name = f"{user}-{mechanism.lower()}" + ("-wrong" if password else "")
        return sasl(name, acl_setup.client_properties(user, password, mechanism))

    commands: list[tuple[str, list[str]]] = [
        (ACL_COMMAND, [*zookeeper, "--add", "--producer", *prefixed,
                       "--allow-principal", "User:alice"]),
        (ACL_COMMAND, [*zookeeper, "--add", "--consumer", *prefixed, "--group", group,
                       "--allow-principal", "User:alice"]),
        (PROBE, [ctx.bootstrap, topic, group, "create"]),  # User:ANONYMOUS may create
    ]
    alice = {"PLAIN": password_login("alice", "PLAIN"),
             "SCRAM-SHA-512": password_login("alice", "SCRAM-SHA-512"),
             "OAUTHBEARER": sasl("alice-oauthbearer", acl_setup.oauthbearer_properties(
                 ALICE_TOKEN))}
    logins = list(alice.values())  # the first waits until the grants apply
    commands.append((PROBE, [logins[0], topic, group, "await-allowed", *ALLOWED]))
    commands += [(PROBE, [login, topic, group, *ALLOWED]) for login in logins[1:]]
    bob = [password_login("bob", "PLAIN"), password_login("bob", "SCRAM-SHA-512"),
           sasl("bob-oauthbearer", acl_setup.oauthbearer_properties(BOB_TOKEN))]
    commands += [(PROBE, [login, topic, group, *REFUSED]) for login in bob]
    refused_logins = [password_login("alice", "PLAIN", "not-her-secret"),
                      password_login("carl", "PLAIN", "anything"),
                      password_login("alice", "SCRAM-SHA-512", "not-her-secret"),
                      *(sasl(name, acl_setup.oauthbearer_properties(options))
                        for name, options in BAD_TOKENS.items())]
    commands += [(PROBE, [login, topic, group, "describe"]) for login in refused_logins]
    # signed tokens on the SASL_SSL listener (KIP-768: a JWKS, an audience, an issuer)
    for token in acl_oauth.TOKENS:
        steps: tuple[str, ...] = {"alice": ALLOWED, "bob": REFUSED}.get(token, ("describe",))
        commands.append((PROBE, [signed(token), topic, group, *steps]))
    return batch_transcript(commands)


def kerberos(ctx: Context) -> Transcript:
    """One JVM with the lab's krb5.conf: grants for User:alice, then the probe logged in
    with alice's and bob's keytabs."""
    realm = acl_kerberos.LabKerberos(ctx.lab.directory / acl_kerberos.KDC_DIR)
    if ctx.lab.kdc is None:
        raise acl_kerberos.KerberosUnavailable(
            "the lab started no KDC: MIT Kerberos (krb5-kdc, krb5-admin-server, krb5-user) "
            "is not installed")
    prefix = f"acl-{ctx.token}-krb-"
    topic, group = f"{prefix}orders", f"{prefix}readers"
    zookeeper = acl_setup.zookeeper_args(ctx.zookeeper_connect)
    prefixed = ["--topic", prefix, "--resource-pattern-type", "prefixed"]

    def login(user: str, **settings: str) -> str:
        return _login(ctx, f"{user}-gssapi", {**realm.client_properties(user), **settings},
                      acl_setup.SASL_LISTENER)

    commands: list[tuple[str, list[str]]] = [
        (ACL_COMMAND, [*zookeeper, "--add", "--producer", *prefixed,
                       "--allow-principal", "User:alice"]),
        (ACL_COMMAND, [*zookeeper, "--add", "--consumer", *prefixed, "--group", group,
                       "--allow-principal", "User:alice"]),
        (PROBE, [ctx.bootstrap, topic, group, "create"]),
        (PROBE, [login("alice"), topic, group, "await-allowed", *ALLOWED]),
        (PROBE, [login("bob"), topic, group, *REFUSED]),
        # a foreign realm's principal, which no rule maps: Kafka drops the connection
        # after the exchange and its client retries until its (here short) timeout
        (PROBE, [login("carol", **SHORT_TIMEOUTS), topic, group, "describe"]),
    ]
    return batch_transcript(commands, realm.jvm_options)


# Java's RFC 2253 names of the lab's client certificates (compat/acl_tls.py CLIENTS)
CERTIFICATE_PRINCIPALS: Mapping[str, str] = {
    "alice": "User:CN=alice,O=Acme",
    "carol": "User:carol",  # mapped
    "dave": r"User:CN=dave,OU=\#ops\+dev,O=Acme\, Inc.,C=DE",
    "erin": "User:CN=erin,1.2.840.113549.1.9.1=#16116572696e4061636d652e6578616d706c65,O=Acme",
}
UNMAPPED_CAROL = "User:CN=Carol,OU=mapped,O=Acme"  # what the mapping rule replaces


def certificates(ctx: Context) -> Transcript:
    """One JVM: grants for certificate names through ZooKeeper, then the probe with each
    certificate (and with an untrusted one, and none)."""
    topic, group = f"acl-{ctx.token}-tls-orders", f"acl-{ctx.token}-tls-readers"
    zookeeper = acl_setup.zookeeper_args(ctx.zookeeper_connect)
    pki = acl_tls.LabPki(ctx.lab.directory / acl_tls.PKI_DIR)
    names = CERTIFICATE_PRINCIPALS

    def grant(*args: str) -> tuple[str, list[str]]:
        return ACL_COMMAND, [*zookeeper, "--add", *args]

    def probe(client: str | None, *steps: str) -> tuple[str, list[str]]:
        login = _login(ctx, client or "no-certificate", pki.client_properties(client),
                       acl_tls.SSL_LISTENER)
        return PROBE, [login, topic, group, *steps]

    def strict(client: str, *steps: str) -> tuple[str, list[str]]:
        login = _login(ctx, f"{client}-strict", {**pki.client_properties(client),
                                                 **SHORT_TIMEOUTS}, acl_tls.STRICT_LISTENER)
        return PROBE, [login, topic, group, *steps]

    def sasl_ssl(user: str, client: str | None, *steps: str) -> tuple[str, list[str]]:
        login = _login(ctx, f"{user}-sasl-ssl-{client or 'no-certificate'}",
                       pki.sasl_ssl_properties(user, client), acl_tls.SASL_SSL_LISTENER)
        return PROBE, [login, topic, group, *steps]

    commands = [
        (PROBE, [ctx.bootstrap, topic, group, "create"]),  # User:ANONYMOUS may create
        grant("--topic", topic, "--allow-principal", names["carol"],
              "--operation", "Write", "--operation", "Describe"),
        # the name the mapping replaced: it must not count
        grant("--consumer", "--topic", topic, "--group", group,
              "--allow-principal", UNMAPPED_CAROL),
        grant("--consumer", "--topic", topic, "--group", group,
              "--allow-principal", names["dave"]),
        grant("--topic", topic, "--allow-principal", names["erin"], "--operation", "Describe"),
        # the SASL_SSL login's
        grant("--topic", topic, "--allow-principal", "User:alice", "--operation", "Describe"),
        # alice's last: once they apply, the ones before do too
        grant("--producer", "--topic", topic, "--allow-principal", names["alice"]),
        grant("--consumer", "--topic", topic, "--group", group,
              "--allow-principal", names["alice"]),
        (ACL_COMMAND, [*zookeeper, "--list", "--topic", topic]),
        probe("alice", "await-allowed", *ALLOWED),
        probe("carol", *REFUSED),
        probe("dave", *REFUSED),
        probe("erin", *REFUSED),
        probe("mallory", *REFUSED),
        probe(acl_tls.UNTRUSTED, "describe"),
        probe(None, "describe"),
        # a listener whose rules map carol's name and no other
        strict("carol", "whoami", "describe"),
        strict("alice", "describe"),
        # SASL_SSL: no certificate needed (KIP-684), the SASL login names the principal
        sasl_ssl("alice", None, "whoami", "describe", "produce"),
        sasl_ssl("alice", "carol", "whoami", "describe", "produce"),
    ]
    return batch_transcript(commands)


RULES = (SCRATCH_RULE, STDOUT_FRAMES, sort_acl_blocks)

SCENARIOS = [
    Scenario("acls.sasl-mechanisms",
             "ACLs for User:alice and User:bob logged in with PLAIN, SCRAM-SHA-512 and "
             "OAUTHBEARER (unsecured tokens), and refused logins, on a Java client",
             Side("acls/sasl-mechanisms@kafka", KAFKA, mechanisms, ACL_PAIR),
             Side("acls/sasl-mechanisms@moldau", MOLDAU, mechanisms, ACL_PAIR),
             RULES, fast=False),
    Scenario("acls.sasl-gssapi",
             "ACLs for User:alice and User:bob logged in with GSSAPI (keytabs of a KDC the "
             "lab starts), on a Java client",
             Side("acls/sasl-gssapi@kafka", KAFKA, kerberos, ACL_PAIR),
             Side("acls/sasl-gssapi@moldau", MOLDAU, kerberos, ACL_PAIR),
             RULES, fast=False),
    Scenario("acls.tls-principals",
             "ACLs for the names of TLS client certificates (whole, escaped, with an OID, "
             "mapped by ssl.principal.mapping.rules), and refused handshakes, on a Java "
             "client",
             Side("acls/tls-principals@kafka", KAFKA, certificates, ACL_PAIR),
             Side("acls/tls-principals@moldau", MOLDAU, certificates, ACL_PAIR),
             RULES, fast=False),
]
