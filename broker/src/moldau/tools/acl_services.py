"""Where kafka-acls reads and writes ACLs, as Kafka 3.9's AclCommand does it: through the
Admin API of a running cluster (`--bootstrap-server`: DescribeAcls, CreateAcls, DeleteAcls),
or straight into ZooKeeper through Kafka's AclAuthorizer (the deprecated
`--authorizer-properties zookeeper.connect=...` path, which works before any broker runs).

The two paths fail as Kafka's do: the Admin API stops at the first error the cluster
answers (the command fails with it); the authorizer reports each binding it could not
write, on standard output, and goes on (the command still succeeds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from moldau.authorizer.acl_authorizer import AclAuthorizer
from moldau.cluster import zk_acls, zk_sasl, zk_tls
from moldau.cluster.zk_client import KafkaZkClient, ZkError
from moldau.errors import KafkaError
from moldau.protocol.generated.create_acls_request import CreateAclsRequest
from moldau.protocol.generated.create_acls_response import CreateAclsResponse
from moldau.protocol.generated.delete_acls_request import DeleteAclsRequest
from moldau.protocol.generated.delete_acls_response import DeleteAclsResponse
from moldau.protocol.generated.describe_acls_response import DescribeAclsResponse
from moldau.security.acls import (
    AclBinding,
    AclBindingFilter,
    binding_from_codes,
)
from moldau.security.ssl_settings import TlsConfigError
from moldau.tools.admin import Admin
from moldau.tools.kafka_errors import error_text, exception_class
from moldau.tools.options import ToolError

ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
# The ZooKeeper client keys a --zk-tls-config-file may set (Kafka's
# ZkSslConfigToSystemPropertyMap), with or without the "authorizer." prefix.
ZK_TLS_KEYS = ("zookeeper.clientCnxnSocket", "zookeeper.ssl.client.enable",
               "zookeeper.ssl.keystore.location", "zookeeper.ssl.keystore.password",
               "zookeeper.ssl.keystore.type", "zookeeper.ssl.truststore.location",
               "zookeeper.ssl.truststore.password", "zookeeper.ssl.truststore.type",
               "zookeeper.ssl.protocol", "zookeeper.ssl.enabled.protocols",
               "zookeeper.ssl.cipher.suites", "zookeeper.ssl.endpoint.identification.algorithm",
               "zookeeper.ssl.crl.enable", "zookeeper.ssl.ocsp.enable")
AUTHORIZER_PREFIX = "authorizer."
_VERSION = 3  # of DescribeAcls, CreateAcls and DeleteAcls (v1+ carry the pattern type)


class AclService(Protocol):
    """Reads and writes ACLs for one command."""

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]: ...

    def create(self, bindings: Sequence[AclBinding]) -> None: ...

    def delete(self, filters: Sequence[AclBindingFilter]) -> None: ...

    def close(self) -> None: ...


class AdminCallFailure(ToolError):
    """An error the cluster answered, as the Admin API's future fails with it: an
    ExecutionException whose message, and cause, is Kafka's exception for the code."""

    def __init__(self, code: int, message: str | None) -> None:
        cause = f"{exception_class(code)}: {error_text(code, message)}"
        super().__init__(cause)
        # what Kafka's Utils.stackTrace shows of it, frames left out
        self.trace = [f"java.util.concurrent.ExecutionException: {cause}", f"Caused by: {cause}"]


class AdminAclService:
    """The ACL APIs of a cluster, sent to any broker (Kafka's least loaded node)."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        patterns, entry = binding_filter.pattern_filter, binding_filter.entry_filter
        answer: DescribeAclsResponse = self.admin.call(
            "DescribeAcls", _VERSION, resource_type_filter=patterns.resource_type.value,
            resource_name_filter=patterns.name, pattern_type_filter=patterns.pattern_type.value,
            principal_filter=entry.principal, host_filter=entry.host,
            operation=entry.operation.value, permission_type=entry.permission.value)
        if answer.error_code:
            raise AdminCallFailure(answer.error_code, answer.error_message)
        return [binding_from_codes(resource.resource_type, resource.resource_name,
                                   resource.pattern_type, acl.principal, acl.host,
                                   acl.operation, acl.permission_type)
                for resource in answer.resources for acl in resource.acls]

    def create(self, bindings: Sequence[AclBinding]) -> None:
        answer: CreateAclsResponse = self.admin.call("CreateAcls", _VERSION, creations=[
            CreateAclsRequest.AclCreation(
                resource_type=b.pattern.resource_type.value, resource_name=b.pattern.name,
                resource_pattern_type=b.pattern.pattern_type.value,
                principal=b.entry.principal, host=b.entry.host,
                operation=b.entry.operation.value, permission_type=b.entry.permission.value)
            for b in bindings])
        for result in answer.results:
            if result.error_code:
                raise AdminCallFailure(result.error_code, result.error_message)

    def delete(self, filters: Sequence[AclBindingFilter]) -> None:
        answer: DeleteAclsResponse = self.admin.call("DeleteAcls", _VERSION, filters=[
            DeleteAclsRequest.DeleteAclsFilter(
                resource_type_filter=f.pattern_filter.resource_type.value,
                resource_name_filter=f.pattern_filter.name,
                pattern_type_filter=f.pattern_filter.pattern_type.value,
                principal_filter=f.entry_filter.principal, host_filter=f.entry_filter.host,
                operation=f.entry_filter.operation.value,
                permission_type=f.entry_filter.permission.value)
            for f in filters])
        for result in answer.filter_results:
            if result.error_code:
                raise AdminCallFailure(result.error_code, result.error_message)
            for matching in result.matching_acls:
                if matching.error_code:
                    raise AdminCallFailure(matching.error_code, matching.error_message)

    def close(self) -> None:
        self.admin.close()


class AuthorizerAclService:
    """Kafka's AclAuthorizer on its own ZooKeeper session: the ACL znodes and change
    notifications every broker follows."""

    def __init__(self, zk: KafkaZkClient, authorizer: AclAuthorizer) -> None:
        self.zk = zk
        self.authorizer = authorizer

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return self.authorizer.describe_acls(binding_filter)

    @staticmethod
    def _report(action: str, error: KafkaError) -> None:
        """As Kafka's AclCommand: the message and the exception (its stack trace, which
        Moldau has no frames of) on stdout, then an empty line; the command goes on."""
        print(f"Error while {action} ACLs: {error}")
        print(f"{exception_class(error.code)}: {error}\n", flush=True)

    def create(self, bindings: Sequence[AclBinding]) -> None:
        try:
            errors = self.authorizer.create_acls(bindings)
        except KafkaError as exc:  # ZooKeeper went away: nothing was written
            raise ToolError(str(exc)) from None
        for error in errors:
            if error is not None:
                self._report("adding", error)

    def delete(self, filters: Sequence[AclBindingFilter]) -> None:
        try:
            results = self.authorizer.delete_acls(filters)
        except KafkaError as exc:
            raise ToolError(str(exc)) from None
        for result in results:
            if result.error is not None:
                self._report("removing", result.error)
            for deleted in result.bindings:
                if deleted.error is not None:
                    self._report("removing", deleted.error)

    def close(self) -> None:
        try:
            self.authorizer.close()
        finally:
            self.zk.close()


def authorizer_setting(properties: Mapping[str, str], key: str) -> str | None:
    """A ZooKeeper client setting as AclAuthorizer reads it: `authorizer.<key>` wins."""
    return properties.get(AUTHORIZER_PREFIX + key, properties.get(key))


def zk_tls_file_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """The keys of a --zk-tls-config-file that count; Kafka ignores the others."""
    valid = {*ZK_TLS_KEYS, *(AUTHORIZER_PREFIX + key for key in ZK_TLS_KEYS)}
    return {key: value for key, value in properties.items() if key in valid}


def _int_setting(properties: Mapping[str, str], key: str, default: int | None) -> int | None:
    value = authorizer_setting(properties, key)
    if value is None:
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise ToolError(f"Invalid value {value} for configuration {key}: Not a number of type "
                        "INT") from None


def open_authorizer(properties: Mapping[str, str]) -> AuthorizerAclService:
    """AclAuthorizer configured from authorizer properties: `authorizer.zookeeper.url` or
    `zookeeper.connect` (with its chroot), the session and connection timeouts,
    ZooKeeper TLS from the `zookeeper.ssl.*` keys and SASL from KAFKA_OPTS's JAAS file
    (`zookeeper.set.acl`, true by default with SASL as in Kafka, puts Kafka's secure ACLs
    on the znodes created). Connected, its ACLs loaded."""
    connect = properties.get(AUTHORIZER_PREFIX + "zookeeper.url") \
        or properties.get("zookeeper.connect")
    if not connect:
        raise ToolError('Missing required configuration "zookeeper.connect" which has no '
                        "default value.")
    client_values = {key: value for key in (*ZK_TLS_KEYS, zk_acls.SET_ACL)
                     if (value := authorizer_setting(properties, key)) is not None}
    try:
        # SASL from KAFKA_OPTS's JAAS `Client` section; AclCommand then defaults
        # zookeeper.set.acl to true (JaasUtils.isZkSaslEnabled)
        sasl = zk_sasl.settings_from_environment()
        client_values.setdefault(zk_acls.SET_ACL, str(sasl.login is not None).lower())
        zk_acls.check_secure_acls(client_values, sasl)
        tls_context = zk_tls.tls_context(client_values)
    except (TlsConfigError, OSError, zk_sasl.ZkSaslConfigError,
            zk_acls.ZkAclConfigError) as exc:
        raise ToolError(str(exc)) from None
    session_ms = _int_setting(properties, "zookeeper.session.timeout.ms", 18000) or 18000
    zk = KafkaZkClient(
        connect, session_timeout_ms=session_ms,
        connection_timeout_ms=_int_setting(properties, "zookeeper.connection.timeout.ms", None),
        tls_context=tls_context,
        secure_acls=str(client_values[zk_acls.SET_ACL]).strip().lower() == "true",
        max_in_flight=_int_setting(properties, "zookeeper.max.in.flight.requests", 10) or 10,
        sasl=sasl.login)
    try:
        zk.start()
        authorizer = AclAuthorizer.from_zk_client(zk)
        authorizer.start()
    except (ZkError, KafkaError) as exc:
        zk.close()
        raise ToolError(str(exc)) from None
    return AuthorizerAclService(zk, authorizer)
