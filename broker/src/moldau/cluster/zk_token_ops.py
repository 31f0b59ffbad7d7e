"""KafkaZkClient's operations on delegation tokens, in Kafka 3.9's layout (ZkData's
DelegationToken*ZNode objects, KafkaZkClient's token methods):

- `/delegation_token/tokens/<token id>`: the token's information as JSON version 3,
  `{"version":3,"owner":...,"tokenRequester":...,"renewers":[...],"issueTimestamp":...,
  "maxTimestamp":...,"expiryTimestamp":...,"tokenId":...}`, principals written as
  `User:alice` through Kafka's Sanitizer (`User%3Aalice`), keys in the order Kafka's
  Scala map writes them. Never the HMAC: each broker derives it from the id and the secret.
- `/delegation_token/token_changes/token_change_<10-digit seq>`: a persistent sequential
  znode holding the token id (plain UTF-8, not JSON), written after every create, renew,
  expire and removal; every broker re-reads that token (or drops it when its znode is
  gone) and deletes notifications older than 15 minutes, as Kafka's
  ZkNodeChangeNotificationListener does.

Each function is a method of KafkaZkClient, which binds it in its class body (zk_client.py);
it takes the ZkSession it runs on and uses its generic operations (zk_session.py).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, NamedTuple

from kazoo.exceptions import NoNodeError

from moldau.cluster import zk_json
from moldau.cluster.zk_config_ops import CONFIG_CHANGE_EXPIRATION_MS
from moldau.cluster.zk_paths import desanitize, sanitize, sequence_number
from moldau.security.delegation_tokens import TokenInformation, parse_principal
from moldau.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from moldau.cluster.zk_session import ZkSession

log = logging.getLogger("moldau.cluster.zk_client")

DELEGATION_TOKEN_PATH = "/delegation_token"
TOKENS_PATH = f"{DELEGATION_TOKEN_PATH}/tokens"
TOKEN_CHANGES_PATH = f"{DELEGATION_TOKEN_PATH}/token_changes"
TOKEN_CHANGE_PREFIX = "token_change_"
TOKEN_INFO_VERSION = 3  # DelegationTokenManagerZk.CurrentVersion


class TokenChange(NamedTuple):
    """One change notification: its znode name and the token it names."""

    seq_name: str
    token_id: str


def token_path(token_id: str) -> str:
    return f"{TOKENS_PATH}/{token_id}"


def _principal_text(principal: KafkaPrincipal) -> str:
    return sanitize(str(principal))


def _principal(text: object, key: str) -> KafkaPrincipal:
    if not isinstance(text, str):
        raise ValueError(f"delegation token znode: {key} is not a string: {text!r}")
    return parse_principal(desanitize(text))


def encode_token_info(info: TokenInformation) -> bytes:
    """The znode's JSON, byte for byte as Kafka 3.9 writes it."""
    body: dict[str, Any] = {  # Any: the JSON values (numbers, strings, a list)
        "version": TOKEN_INFO_VERSION,
        "owner": _principal_text(info.owner),
        "tokenRequester": _principal_text(info.token_requester),
        "renewers": [_principal_text(r) for r in info.renewers],
        "issueTimestamp": info.issue_timestamp,
        "maxTimestamp": info.max_timestamp,
        "expiryTimestamp": info.expiry_timestamp,
        "tokenId": info.token_id,
    }
    return zk_json.json_bytes(zk_json.ordered(body, zk_json.scala_immutable_order(tuple(body))))


def decode_token_info(data: bytes | None) -> TokenInformation | None:
    """Every version Kafka wrote (1 and 2 have no token requester: the owner asked);
    None for an empty znode; ValueError for anything else Kafka would refuse."""
    parsed = zk_json.parse_json(data)
    if parsed is None:
        return None
    if not isinstance(parsed, dict):
        raise ValueError(f"delegation token znode: expected a JSON object, got {data!r}")
    try:
        version = int(parsed["version"])
        if not 0 < version <= TOKEN_INFO_VERSION:
            raise ValueError(f"delegation token znode: unknown version {version}")
        owner = _principal(parsed["owner"], "owner")
        requester = (_principal(parsed["tokenRequester"], "tokenRequester") if version >= 3
                     else owner)
        renewers = parsed["renewers"]
        if not isinstance(renewers, list):
            raise ValueError(f"delegation token znode: renewers is not a list: {renewers!r}")
        return TokenInformation(
            token_id=str(parsed["tokenId"]), owner=owner, token_requester=requester,
            renewers=tuple(_principal(r, "renewers") for r in renewers),
            issue_timestamp=int(parsed["issueTimestamp"]),
            max_timestamp=int(parsed["maxTimestamp"]),
            expiry_timestamp=int(parsed["expiryTimestamp"]))
    except KeyError as exc:
        raise ValueError(f"delegation token znode: {exc.args[0]} is missing") from None
    except TypeError as exc:
        raise ValueError(f"delegation token znode: {exc}") from None


# -- the operations (methods of KafkaZkClient) ----------------------------------------------


def create_delegation_token_paths(self: ZkSession) -> None:
    """KafkaZkClient.createDelegationTokenPaths: both parents, with their ACLs (the tokens'
    creator-only under zookeeper.set.acl)."""
    self.ensure_path(TOKEN_CHANGES_PATH)
    self.ensure_path(TOKENS_PATH)


def get_delegation_token_ids(self: ZkSession) -> list[str]:
    return self.get_children(TOKENS_PATH)


def get_delegation_token(self: ZkSession, token_id: str) -> TokenInformation | None:
    """A token's information; None when its znode is missing or empty."""
    found = self.get(token_path(token_id))
    return None if found is None else decode_token_info(found[0])


def get_all_delegation_tokens(self: ZkSession) -> list[TokenInformation]:
    """Every stored token, read in one pipelined pass; a znode that does not decode is
    logged and left out (Kafka logs it and loads the others)."""
    ids = self.get_children(TOKENS_PATH)
    found = self._get_many([token_path(t) for t in ids])
    tokens = []
    for token_id, item in zip(ids, found, strict=True):
        if item is None:
            continue
        try:
            info = decode_token_info(item[0])
        except ValueError as exc:
            log.error("Error while getting Token for tokenId: %s: %s", token_id, exc)
            continue
        if info is not None:
            tokens.append(info)
    return tokens


def set_or_create_delegation_token(self: ZkSession, info: TokenInformation) -> None:
    """KafkaZkClient.setOrCreateDelegationToken: set the znode, create it when missing."""
    self._set_or_create(token_path(info.token_id), encode_token_info(info))


def delete_delegation_token(self: ZkSession, token_id: str) -> None:
    self.delete_recursive(token_path(token_id))


def create_token_change_notification(self: ZkSession, token_id: str) -> str:
    """A new `token_change_<seq>` naming the token; returns its znode name."""
    zk = self._client()
    create_path = f"{TOKEN_CHANGES_PATH}/{TOKEN_CHANGE_PREFIX}"
    while True:
        try:
            created = self._call(zk.create, create_path, token_id.encode("utf-8"),
                                 self._acl(create_path), sequence=True)
            return created.rsplit("/", 1)[1]
        except NoNodeError:
            self.ensure_path(TOKEN_CHANGES_PATH)


def read_token_changes(self: ZkSession, after: str | None = None, purge: bool = True,
                       max_age_ms: int = CONFIG_CHANGE_EXPIRATION_MS) -> list[TokenChange]:
    """The token change notifications after sequence name `after` (all when None), in
    order; notifications older than 15 minutes (ZooKeeper ctime) are deleted unless
    purge is False."""
    names = [c for c in self.get_children(TOKEN_CHANGES_PATH)
             if c.startswith(TOKEN_CHANGE_PREFIX)]
    names.sort(key=sequence_number)
    found = self._get_many([f"{TOKEN_CHANGES_PATH}/{n}" for n in names])
    changes: list[TokenChange] = []
    expired: list[str] = []
    now_ms = time.time() * 1000
    for name, item in zip(names, found, strict=True):
        if item is None:
            continue
        data, stat = item
        if after is None or sequence_number(name) > sequence_number(after):
            changes.append(TokenChange(name, data.decode("utf-8", "replace")))
        if purge and now_ms - stat.ctime > max_age_ms:
            expired.append(name)
    for name in expired:
        with contextlib.suppress(NoNodeError):  # another broker purged it first
            self._call(self._client().delete, f"{TOKEN_CHANGES_PATH}/{name}")
    return changes
