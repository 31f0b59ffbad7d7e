"""zookeeper-security-migration.sh (Kafka 3.9's ZkSecurityMigrator): sets Kafka's ZooKeeper
ACLs on every znode the cluster already has, the last step of turning on (or off)
authenticated ZooKeeper access.

Securing a running cluster, as Kafka documents it: roll the brokers with a ZooKeeper
identity (the JAAS `Client` section in KAFKA_OPTS, or a TLS client certificate) and
`zookeeper.set.acl=false`; roll them again with `zookeeper.set.acl=true`, so what they
create from then on is protected; then run this tool with `--zookeeper.acl=secure`, which
gives what was created before the same ACLs (zk_acls.acls_for: the creator may do
everything, everyone may read, the sensitive roots are creator-only). `unsecure` opens
everything again (ZooKeeper's world:anyone with every right), before a roll that drops
the identity.

The tool walks the chroot's root and every root Kafka secures (ZkData.SecureRootPaths
with the ACL stores' paths), creating a missing root except /controller, and sets each
znode's ACL in pipelined requests. A znode deleted meanwhile is skipped with a warning;
a lost session stops the tool (run it again)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Mapping

from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError
from kazoo.protocol.states import ZnodeStat
from kazoo.security import ACL, OPEN_ACL_UNSAFE

from moldau.cluster import zk_acls, zk_paths, zk_sasl, zk_tls
from moldau.cluster.zk_client import KafkaZkClient, ZkError
from moldau.security import acls as acl_model
from moldau.security.sasl.kafka_opts import JAVA_LOGIN_CONFIG_PARAM
from moldau.security.tls import TlsConfigError
from moldau.tools.acl_services import ZK_TLS_KEYS
from moldau.tools.options import Opt, Options, ToolError, UsageError
from moldau.tools.properties import load_properties
from moldau.tools.runner import ILLEGAL_ARGUMENT, Tool

log = logging.getLogger("kafka.admin.ZkSecurityMigrator")

USAGE = ("ZooKeeper Migration Tool Help. This tool updates the ACLs of znodes as part of the "
         "process of setting up ZooKeeper authentication.")
TLS_FILE_OPTION = "zk-tls-config-file"
TLS_ENABLE, CNXN_SOCKET, KEYSTORE = (
    "zookeeper.ssl.client.enable", "zookeeper.clientCnxnSocket",
    "zookeeper.ssl.keystore.location")
# ZkData.SecureRootPaths and ZkAclStore.securePaths, in Kafka's order
SECURE_ROOT_PATHS = (
    zk_paths.ADMIN_PATH, zk_paths.BROKERS_PATH, zk_paths.CLUSTER_PATH, zk_paths.CONFIG_PATH,
    zk_paths.CONTROLLER_PATH, zk_paths.CONTROLLER_EPOCH_PATH,
    zk_paths.ISR_CHANGE_NOTIFICATION_PATH, zk_paths.PRODUCER_ID_BLOCK_PATH,
    zk_paths.LOG_DIR_EVENT_NOTIFICATION_PATH, "/delegation_token",
    acl_model.EXTENDED_ACL_ROOT, zk_paths.MIGRATION_PATH, zk_paths.FEATURE_PATH,
    acl_model.LITERAL_ACL_ROOT, acl_model.LITERAL_CHANGE_ROOT,
    f"{acl_model.EXTENDED_ACL_ROOT}/prefixed", acl_model.EXTENDED_CHANGE_ROOT)
WINDOW = 500  # requests in flight at once

# ZK_TLS_KEYS in the order ZkSecurityMigrator's usage table lists them (a hash set's)
_TLS_KEYS_AS_LISTED = (
    "zookeeper.ssl.keystore.location", "zookeeper.clientCnxnSocket",
    "zookeeper.ssl.truststore.location", "zookeeper.ssl.truststore.password",
    "zookeeper.ssl.truststore.type", "zookeeper.ssl.client.enable", "zookeeper.ssl.cipher.suites",
    "zookeeper.ssl.protocol", "zookeeper.ssl.keystore.password", "zookeeper.ssl.ocsp.enable",
    "zookeeper.ssl.endpoint.identification.algorithm", "zookeeper.ssl.crl.enable",
    "zookeeper.ssl.keystore.type", "zookeeper.ssl.enabled.protocols")

OPTIONS = [
    Opt("zookeeper.acl", "Indicates whether to make the Kafka znodes in ZooKeeper secure or "
        "unsecure. The options are 'secure' and 'unsecure'", ""),
    Opt("zookeeper.connect", "Sets the ZooKeeper connect string (ensemble). This parameter "
        "takes a comma-separated list of host:port pairs.", "", default="localhost:2181"),
    Opt("zookeeper.session.timeout", "Sets the ZooKeeper session timeout.", "", int,
        30000),
    Opt("zookeeper.connection.timeout", "Sets the ZooKeeper connection timeout.", "",
        int, 30000),
    Opt("enable.path.check", "Checks if all the root paths exist in ZooKeeper before "
        "migration. If not, exit the command."),
    Opt(TLS_FILE_OPTION, "Identifies the file where ZooKeeper client TLS connectivity "
        "properties are defined.  Any properties other than " + ", ".join(_TLS_KEYS_AS_LISTED)
        + " are ignored.", "ZooKeeper TLS configuration"),
]


# Kafka's IllegalArgumentException after the ERROR line, as its main prints it
INCORRECT_CONFIGURATION = f"{ILLEGAL_ARGUMENT}: Incorrect configuration"


def _tls_properties(options: Options) -> dict[str, str]:
    if not options.has(TLS_FILE_OPTION):
        return {}
    found = load_properties(options.get(TLS_FILE_OPTION))
    return {key: value for key, value in found.items() if key in ZK_TLS_KEYS}


def _tls_client_auth(values: Mapping[str, str]) -> bool:
    """KafkaConfig.zkTlsClientAuthEnabled: TLS on, a socket class and a key store named."""
    return (values.get(TLS_ENABLE, "").strip() == "true" and CNXN_SOCKET in values
            and KEYSTORE in values)


def _login(tls: Mapping[str, str]) -> zk_sasl.ZkSaslSettings:
    """The ZooKeeper identity: Kafka refuses to run without one, SASL or a certificate."""
    try:
        sasl = zk_sasl.settings_from_environment()
    except zk_sasl.ZkSaslConfigError as exc:
        raise ToolError(str(exc)) from None
    jaas_file = sasl.properties.get(JAVA_LOGIN_CONFIG_PARAM)
    tls_auth = _tls_client_auth(tls)
    if jaas_file is None and not tls_auth:
        print("ERROR: No JAAS configuration file has been specified and no TLS client "
              "certificate has been specified. Please make sure that you set the system "
              f"property {JAVA_LOGIN_CONFIG_PARAM} or provide a ZooKeeper client TLS "
              f"configuration via --{TLS_FILE_OPTION} <filename> identifying at least "
              f"{TLS_ENABLE}, {CNXN_SOCKET}, and {KEYSTORE}", file=sys.stderr)
        raise ToolError(INCORRECT_CONFIGURATION)
    if not tls_auth and sasl.login is None:
        print("ERROR: Security isn't enabled, most likely the file isn't set properly: "
              f"{jaas_file}")
        raise ToolError(INCORRECT_CONFIGURATION)
    return sasl


class Migrator:
    """Sets `acls_for(path)` on a subtree of znodes, level by level, pipelined."""

    def __init__(self, zk: KafkaZkClient, secure: bool) -> None:
        self.zk = zk
        self.secure = secure

    def acls(self, path: str) -> list[ACL]:
        return zk_acls.acls_for(path) if self.secure else list(OPEN_ACL_UNSAFE)

    def missing_roots(self) -> list[str]:
        return [path for path in SECURE_ROOT_PATHS if not self.zk.exists(path)]

    def run(self) -> None:
        """The roots' subtrees (after the chroot itself, which `set_acls(["/"])` does)."""
        roots = []
        for path in SECURE_ROOT_PATHS:
            if path == zk_paths.CONTROLLER_PATH and not self.zk.exists(path):
                continue  # an ephemeral znode: only its controller creates it
            self.zk.ensure_path(path)
            roots.append(path)
        self.set_acls(roots, recurse=True)

    def set_acls(self, paths: Iterable[str], recurse: bool) -> None:
        level = list(paths)
        while level:
            children: list[str] = []
            for start in range(0, len(level), WINDOW):
                children += self._window(level[start:start + WINDOW], recurse)
            level = children

    def _window(self, paths: list[str], recurse: bool) -> list[str]:
        """Set the ACLs of `paths` (and list their children) in one round of requests;
        a request lost with the connection is sent again."""
        zk = self.zk.kazoo
        pending = list(paths)
        found: list[str] = []
        while pending:
            calls = [(path, zk.set_acls_async(path, self.acls(path)),
                      zk.get_children_async(path) if recurse else None) for path in pending]
            pending = []
            for path, set_call, children_call in calls:
                try:
                    self._result(set_call, path)
                    if children_call is not None:
                        base = "" if path == "/" else path
                        found += [f"{base}/{child}"
                                  for child in sorted(self._result(children_call, path))]
                except ConnectionLoss:
                    pending.append(path)
                except NoNodeError:
                    log.warning("Znode is gone, it could be have been legitimately deleted: "
                                "%s", path)
        return found

    @staticmethod
    def _result(call: object, path: str) -> list[str]:
        try:
            result = call.get(timeout=6)  # type: ignore[attr-defined]
        except SessionExpiredError:
            print("ZooKeeper session expired while changing ACLs")
            raise ToolError("org.apache.zookeeper.KeeperException$SessionExpiredException: "
                            f"KeeperErrorCode = Session expired for {path}") from None
        return [] if isinstance(result, ZnodeStat) else result


def run(options: Options) -> int:
    tls = _tls_properties(options)
    sasl = _login(tls)
    mode = options.get("zookeeper.acl")
    if mode not in ("secure", "unsecure"):
        raise UsageError(USAGE)
    secure = mode == "secure"
    try:
        tls_context = zk_tls.tls_context(tls)
    except (TlsConfigError, OSError) as exc:
        raise ToolError(str(exc)) from None
    zk = KafkaZkClient(options.get("zookeeper.connect"),
                       session_timeout_ms=options.get("zookeeper.session.timeout"),
                       connection_timeout_ms=options.get("zookeeper.connection.timeout"),
                       tls_context=tls_context, secure_acls=secure, sasl=sasl.login)
    try:
        zk.start()
        migrator = Migrator(zk, secure)
        migrator.set_acls(["/"], recurse=False)
        missing = migrator.missing_roots()
        if missing:
            print("Warning: The following secure root paths do not exist in ZooKeeper: "
                  + ",".join(missing))
            print("That might be due to an incorrect chroot is specified when executing "
                  "the command.")
            if options.has("enable.path.check"):
                print("Exit the command.")
                return 1
        migrator.run()
    except ZkError as exc:
        raise ToolError(str(exc)) from None
    finally:
        zk.close()
    return 0


TOOL = Tool("zookeeper-security-migration", USAGE, OPTIONS, run, plain_parse_errors=True)
