"""`zookeeper.set.acl`: the ACLs Kafka 3.9 puts on the znodes it creates (ZkData.defaultAcls)
and its refusal to set them without an identity ZooKeeper can authenticate.

The creator gets every right through ZooKeeper's `auth` scheme, which the server expands
to the identities the session authenticated with: `sasl:<user>` after a SASL login,
`x509:<subject>` for a TLS client certificate, both when it has both. Everyone may read,
except under the sensitive roots (user and broker configs, delegation tokens), which are
creator-only; the old consumers' path stays open to all, as Kafka leaves it.
"""

from __future__ import annotations

from collections.abc import Mapping

from kazoo.security import ACL, OPEN_ACL_UNSAFE, make_acl

from moldau.cluster.zk_paths import CONSUMERS_PATH
from moldau.cluster.zk_sasl import ZkSaslSettings, describe_properties

SET_ACL = "zookeeper.set.acl"
TLS_ENABLE = "zookeeper.ssl.client.enable"
TLS_KEYSTORE = "zookeeper.ssl.keystore.location"

CREATOR_ALL = make_acl("auth", "", all=True)
WORLD_READ = make_acl("world", "anyone", read=True)
# ZkData.SensitiveRootPaths: /config/users, /config/brokers, /delegation_token/tokens
SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token/tokens")


class ZkAclConfigError(ValueError):
    """`zookeeper.set.acl=true` without a ZooKeeper identity; Kafka's message."""


def acls_for(path: str) -> list[ACL]:
    """The ACLs a secure client puts on a znode it creates at `path` (chroot-relative)."""
    if path == CONSUMERS_PATH:
        return list(OPEN_ACL_UNSAFE)
    if is_sensitive(path):
        return [CREATOR_ALL]
    return [CREATOR_ALL, WORLD_READ]


def is_sensitive(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS)


def tls_identity(values: Mapping[str, object]) -> bool:
    """Whether the ZooKeeper client shows a TLS client certificate (x509 identity)."""
    return _flag(values.get(TLS_ENABLE)) and bool(values.get(TLS_KEYSTORE))


def check_secure_acls(values: Mapping[str, object], sasl: ZkSaslSettings | None = None
                      ) -> None:
    """Kafka refuses `zookeeper.set.acl=true` unless the session authenticates, with SASL
    (`sasl.login`) or a TLS client certificate: the ACLs would lock out the broker itself.
    `values`: a broker's typed config or a tool's properties."""
    if not _flag(values.get(SET_ACL)):
        return
    if tls_identity(values) or (sasl is not None and sasl.login is not None):
        return
    described = sasl.describe() if sasl is not None else describe_properties({})
    raise ZkAclConfigError(
        f"{SET_ACL} is true, but ZooKeeper client TLS configuration identifying at "
        f"least {TLS_ENABLE}, zookeeper.clientCnxnSocket, and {TLS_KEYSTORE} was not present "
        f"and the verification of the JAAS login file failed {described}. Give the "
        "ZooKeeper client an identity: a JAAS 'Client' section (KAFKA_OPTS="
        "-Djava.security.auth.login.config=<file>) or a TLS client certificate")


def _flag(value: object) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() == "true"
