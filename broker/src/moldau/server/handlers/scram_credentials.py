"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), answered as Kafka
3.9's ZkAdminManager answers them in ZooKeeper mode (KIP-554; kafka-configs.sh and
AdminClient.describe/alterUserScramCredentials send them).

Describe needs DESCRIBE on the cluster (else 31 for the whole response) and reads
`/config/users` on any broker. Alter is answered by the active controller only (another
broker answers 41 for every user, and the client asks the controller), then needs ALTER on
the cluster (else 31 for every user). Each user is validated on its own, with Kafka's
error codes and messages; a user's valid changes are one compare-and-set write of its
config map (zk_user_ops), which leaves its quota keys as they are, and a change
notification that puts the new credentials in every broker's cache.
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from moldau.cluster import zk_data as zd
from moldau.errors import (
    ClusterAuthorizationFailedError,
    DuplicateResourceError,
    KafkaError,
    NotControllerError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from moldau.protocol.generated.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
)
from moldau.protocol.generated.describe_user_scram_credentials_response import (
    DescribeUserScramCredentialsResponse,
)
from moldau.security.acls import AclOperation, ResourceType
from moldau.security.sasl.scram_credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    CredentialFormatError,
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
)

from .cluster_info import CLUSTER_NAME
from .services import active_controller

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from moldau.cluster.controller import Controller
    from moldau.cluster.zk_async import AsyncZk
    from moldau.protocol.generated.alter_user_scram_credentials_request import (
        AlterUserScramCredentialsRequest,
    )
    from moldau.protocol.generated.describe_user_scram_credentials_request import (
        DescribeUserScramCredentialsRequest,
    )

    from ..requests import RequestContext

log = logging.getLogger("kafka.server.ZkAdminManager")

# Kafka's codes that moldau.errors does not name yet
UNSUPPORTED_SASL_MECHANISM = UnsupportedSaslMechanismError.code
RESOURCE_NOT_FOUND = ResourceNotFoundError.code
DUPLICATE_RESOURCE = DuplicateResourceError.code
UNACCEPTABLE_CREDENTIAL = UnacceptableCredentialError.code
CLUSTER_DENIED = ClusterAuthorizationFailedError.code

# ZkAdminManager's messages
USERNAME_EMPTY = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
TOO_FEW_ITERATIONS = "Too few iterations"
TOO_MANY_ITERATIONS = "Too many iterations"
ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
DELETE_MISSING = "Attempt to delete a user credential that does not exist"
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist"
DESCRIBED_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request"

DescribeResult_ = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
CredentialInfo_ = DescribeUserScramCredentialsResponse.CredentialInfo
AlterResult_ = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


def api_error(exc: KafkaError) -> tuple[int, str | None]:
    """Kafka's ApiError.fromThrowable: the code, and the message unless it only repeats
    the code's default message (never for UNKNOWN_SERVER_ERROR, which could leak)."""
    message = str(exc)
    if exc.code == KafkaError.code or not message or message == exc.default_message:
        return exc.code, None
    return exc.code, message


# --------------------------------------------------------------- DescribeUserScramCredentials


def credential_infos(config: Mapping[str, str]) -> list[CredentialInfo_] | None:
    """The (mechanism, iterations) of each SCRAM key of a user's config, in Kafka's
    mechanism order; None when it has none. A malformed credential raises
    CredentialFormatError."""
    infos = [CredentialInfo_(mechanism=m.type_code,
                             iterations=ScramCredential.from_config_value(text).iterations)
             for m in ScramMechanism if (text := config.get(m.mechanism_name)) is not None]
    return infos or None


def _described(user: str, config: Mapping[str, str], named: bool) -> DescribeResult_ | None:
    """One user's result; None for an unnamed user (describe-all) without a credential."""
    try:
        infos = credential_infos(config)
    except CredentialFormatError as exc:  # bad data got into ZooKeeper
        log.error("Error processing describe user SCRAM credential configs request: %s", exc)
        return DescribeResult_(user=user, error_code=KafkaError.code, error_message=None)
    if infos is not None:
        return DescribeResult_(user=user, credential_infos=infos)
    if not named:
        return None
    return DescribeResult_(user=user, error_code=RESOURCE_NOT_FOUND,
                           error_message=f"{DESCRIBE_MISSING}: {user}")


class DescribeUserScramCredentialsHandler:
    MIN_VERSION, MAX_VERSION = 0, 0

    def __init__(self, zk: AsyncZk) -> None:
        self.zk = zk

    async def __call__(self, ctx: RequestContext, request: DescribeUserScramCredentialsRequest
                       ) -> DescribeUserScramCredentialsResponse:
        names = [u.name for u in request.users or []]
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            # Kafka's error response: one nameless result per user asked for
            return DescribeUserScramCredentialsResponse(
                error_code=CLUSTER_DENIED, error_message=None, results=[
                    DescribeResult_(error_code=CLUSTER_DENIED, error_message=None)
                    for _ in names])
        if not names:  # null or empty: every user with a SCRAM credential
            return await self._describe_all()
        return DescribeUserScramCredentialsResponse(results=await self._describe_named(names))

    async def _describe_all(self) -> DescribeUserScramCredentialsResponse:
        try:
            configs = await self.zk.call(self.zk.client.get_all_user_configs)
        except KafkaError as exc:
            log.error("Error processing describe user SCRAM credential configs request: %s",
                      exc)
            code, message = api_error(exc)
            return DescribeUserScramCredentialsResponse(
                error_code=code, error_message=message or exc.default_message)
        # Kafka names each user by its znode, sanitized (alice%40example.com), and sorts
        by_znode = {(u if u == zd.DEFAULT_ENTITY else zd.sanitize(u)): c
                    for u, c in configs.items()}
        results = [_described(name, by_znode[name], named=False) for name in sorted(by_znode)]
        return DescribeUserScramCredentialsResponse(results=[r for r in results if r])

    async def _describe_named(self, names: list[str]) -> list[DescribeResult_]:
        results: dict[str, DescribeResult_] = {}
        counts = collections.Counter(names)
        for name in counts:
            if not name:
                results[name] = DescribeResult_(user=name, error_code=RESOURCE_NOT_FOUND,
                                                error_message=USERNAME_EMPTY)
            elif counts[name] > 1:
                results[name] = DescribeResult_(user=name, error_code=DUPLICATE_RESOURCE,
                                                error_message=f"{DESCRIBED_TWICE}: {name}")
        for name in counts:
            if name in results:
                continue
            try:
                config = await self.zk.call(self.zk.client.get_user_config, name)
            except KafkaError as exc:
                code, message = api_error(exc)
                results[name] = DescribeResult_(user=name, error_code=code,
                                                error_message=message)
                continue
            described = _described(name, config, named=True)
            assert described is not None  # a named user always has a result
            results[name] = described
        return [results[name] for name in counts]  # once per user, in the order asked


# ------------------------------------------------------------------ AlterUserScramCredentials


class MissingCredentialError(Exception):
    """A deletion of a credential the user does not have (answered 91)."""


@dataclass
class UserAlteration:
    """One user's valid changes: the mechanisms to delete, then the credentials to put
    (or why a credential could not be derived, reported once the deletions are checked)."""

    deletions: list[ScramMechanism] = field(default_factory=list)
    upsertions: dict[ScramMechanism, ScramCredential | KafkaError] = field(default_factory=dict)

    def apply(self, config: dict[str, str]) -> dict[str, str]:
        """The user's new config map (called with the current one, maybe more than once)."""
        missing = [m for m in self.deletions if m.mechanism_name not in config]
        if missing:
            raise MissingCredentialError(DELETE_MISSING)
        for mechanism in self.deletions:
            del config[mechanism.mechanism_name]
        for mechanism, credential in self.upsertions.items():
            if isinstance(credential, KafkaError):
                raise credential
            config[mechanism.mechanism_name] = credential.to_config_value()
        return config


@dataclass
class AlterationPlan:
    refused: list[AlterResult_]  # the users refused before anything is read
    alterations: dict[str, UserAlteration]  # by user, in the order the request names them


def _illegal(name: str, mechanism: int, iterations: int | None) -> str | None:
    """Why a deletion (iterations None) or an upsertion is refused outright."""
    if not name:
        return USERNAME_EMPTY
    if ScramMechanism.by_type(mechanism) is None:
        return UNKNOWN_MECHANISM
    if iterations is not None and iterations < MIN_ITERATIONS:
        return TOO_FEW_ITERATIONS
    if iterations is not None and iterations > MAX_ITERATIONS:
        return TOO_MANY_ITERATIONS
    return None


def _derive(mechanism: ScramMechanism, salted_password: bytes, salt: bytes,
            iterations: int) -> ScramCredential | KafkaError:
    # Java's HMAC refuses an empty key, and Kafka answers UNKNOWN_SERVER_ERROR
    if not salted_password:
        return KafkaError(KafkaError.default_message)
    return credential_from_salted_password(mechanism, salted_password, salt, iterations)


def plan_alterations(request: AlterUserScramCredentialsRequest) -> AlterationPlan:
    """ZkAdminManager.alterUserScramCredentials up to the ZooKeeper reads: users with an
    illegal alteration (the last reason found wins, an upsertion's over a deletion's),
    then users that name one (user, mechanism) twice; the others' alterations."""
    illegal: dict[str, str] = {}
    for deletion in request.deletions:
        if (why := _illegal(deletion.name, deletion.mechanism, None)) is not None:
            illegal[deletion.name] = why
    for upsertion in request.upsertions:
        why = _illegal(upsertion.name, upsertion.mechanism, upsertion.iterations)
        if why is not None:
            illegal[upsertion.name] = why
    refused = [AlterResult_(user=user, error_message=why, error_code=(
        UNSUPPORTED_SASL_MECHANISM if why == UNKNOWN_MECHANISM else UNACCEPTABLE_CREDENTIAL))
        for user, why in illegal.items()]
    pairs = [(u.name, u.mechanism) for u in request.upsertions if u.name not in illegal]
    pairs += [(d.name, d.mechanism) for d in request.deletions if d.name not in illegal]
    twice = list(dict.fromkeys(user for (user, _), n in collections.Counter(pairs).items()
                               if n > 1))
    refused += [AlterResult_(user=user, error_code=DUPLICATE_RESOURCE,
                             error_message=ALTERED_TWICE) for user in twice]
    alterations = {user: UserAlteration() for user, _ in pairs if user not in twice}
    for deletion in request.deletions:
        if deletion.name in alterations:
            alterations[deletion.name].deletions.append(_mechanism(deletion.mechanism))
    for upsertion in request.upsertions:
        if upsertion.name in alterations:
            mechanism = _mechanism(upsertion.mechanism)
            alterations[upsertion.name].upsertions[mechanism] = _derive(
                mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations)
    return AlterationPlan(refused, alterations)


def _mechanism(code: int) -> ScramMechanism:
    mechanism = ScramMechanism.by_type(code)
    assert mechanism is not None, code  # plan_alterations refused the unknown ones
    return mechanism


class AlterUserScramCredentialsHandler:
    MIN_VERSION, MAX_VERSION = 0, 0

    def __init__(self, zk: AsyncZk, controller: Callable[[], Controller | None]) -> None:
        self.zk = zk
        self.controller = controller

    async def __call__(self, ctx: RequestContext, request: AlterUserScramCredentialsRequest
                       ) -> AlterUserScramCredentialsResponse:
        if active_controller(self.controller) is None:
            return self._everyone(request, NotControllerError.code)
        if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            return self._everyone(request, CLUSTER_DENIED)
        plan = plan_alterations(request)
        missing: list[AlterResult_] = []
        failed: list[AlterResult_] = []
        altered: list[AlterResult_] = []
        for user, alteration in plan.alterations.items():
            try:
                await self.zk.call(self.zk.client.update_user_config, user, alteration.apply)
            except MissingCredentialError as exc:
                missing.append(AlterResult_(user=user, error_code=RESOURCE_NOT_FOUND,
                                            error_message=str(exc)))
            except KafkaError as exc:  # Kafka: the code's default message, not the error's
                log.info("Error encountered while altering user SCRAM credentials: %s", exc)
                failed.append(AlterResult_(user=user, error_code=exc.code,
                                           error_message=exc.default_message))
            except Exception:
                log.exception("Error encountered while altering user SCRAM credentials")
                failed.append(AlterResult_(user=user, error_code=KafkaError.code,
                                           error_message=KafkaError.default_message))
            else:
                log.info("Altered the SCRAM credentials of user %s", user)
                altered.append(AlterResult_(user=user, error_code=0))
        return AlterUserScramCredentialsResponse(
            results=[*plan.refused, *missing, *failed, *altered])

    @staticmethod
    def _everyone(request: AlterUserScramCredentialsRequest,
                  code: int) -> AlterUserScramCredentialsResponse:
        """Kafka's error response: every user named, once, sorted, with the code alone."""
        users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
        return AlterUserScramCredentialsResponse(results=[
            AlterResult_(user=user, error_code=code, error_message=None) for user in users])
