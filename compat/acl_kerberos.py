"""GSSAPI on the ACL pair's SASL listener: the tests' throwaway MIT KDC (broker/tests/kdc.py,
Debian's krb5-kdc and krb5-admin-server) started by the lab, a service principal both
brokers share, and keytabs for the lab's users.

Both brokers get the same settings: GSSAPI among `sasl.enabled.mechanisms`,
`sasl.kerberos.service.name=kafka` and a `Krb5LoginModule` keytab login as
`kafka/localhost@EXAMPLE.TEST` (Kafka's Java client names the service after the host it
reaches, and the JVM reverse-resolves 127.0.0.1 to localhost). Kafka's JVM finds the realm
through `-Djava.security.krb5.conf`, Moldau's broker through `KRB5_CONFIG`, Kafka's
client through the same JVM option (`jvm_options`). Users are `<name>@EXAMPLE.TEST`, which
Kafka's default `sasl.kerberos.principal.to.local.rules` make `User:<name>`;
`FOREIGN_USERS` are `<name>@OTHER.TEST`, a realm the first trusts, which those rules do not
map.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from compat import acl_setup

if TYPE_CHECKING:
    from compat.lab import KafkaBroker
    from moldau.devcluster.brokers import BrokerProcess

KDC_MODULE = Path(__file__).resolve().parents[1] / "broker" / "tests" / "kdc.py"
KDC_DIR = "acl-kdc"  # under the lab's directory
SERVICE = "kafka"
SERVICE_HOST = "localhost"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
USERS = ("alice", "bob")
FOREIGN_USERS = ("carol",)  # of the second realm, which no default rule maps


class KerberosUnavailable(RuntimeError):
    """MIT Kerberos' KDC programs are not installed."""


@functools.cache
def _kdc_module() -> ModuleType:
    """The tests' KDC helper, which is not part of the installed package."""
    spec = importlib.util.spec_from_file_location("moldau_test_kdc", KDC_MODULE)
    if spec is None or spec.loader is None:
        raise KerberosUnavailable(f"cannot load {KDC_MODULE}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def available() -> bool:
    return KDC_MODULE.exists() and bool(_kdc_module().kdc_available())


@dataclass(frozen=True)
class LabKerberos:
    """Where the lab's realm keeps its files (`<lab>/acl-kdc`); `start` makes them."""

    directory: Path

    @property
    def krb5_conf(self) -> Path:
        return self.directory / "krb5.conf"

    @property
    def service_keytab(self) -> Path:
        return self.directory / "kafka.keytab"

    def keytab(self, user: str) -> Path:
        return self.directory / f"{user}.keytab"

    @property
    def realm(self) -> str:
        return str(_kdc_module().REALM)

    @property
    def service_principal(self) -> str:
        return f"{SERVICE}/{SERVICE_HOST}@{self.realm}"

    def principal(self, user: str) -> str:
        realm = _kdc_module().OTHER_REALM if user in FOREIGN_USERS else self.realm
        return f"{user}@{realm}"

    @classmethod
    def start(cls, directory: Path) -> tuple[LabKerberos, Any]:
        """The KDC (running; stop it with its `stop()`), the service principal and the
        users, each with a keytab."""
        module = _kdc_module()
        if not module.kdc_available():
            raise KerberosUnavailable(
                "MIT Kerberos' KDC is not installed (krb5-kdc, krb5-admin-server, krb5-user: "
                "scripts/debian-packages.txt)")
        kdc = module.TestKdc(directory)
        kdc.start()
        kerberos = cls(directory)
        try:
            kdc.principal_with_keytab(kerberos.service_principal, kerberos.service_keytab)
            for user in (*USERS, *FOREIGN_USERS):
                kdc.principal_with_keytab(kerberos.principal(user), kerberos.keytab(user))
        except BaseException:
            kdc.stop()
            raise
        return kerberos, kdc

    @property
    def jvm_options(self) -> list[str]:
        return [f"-Djava.security.krb5.conf={self.krb5_conf}"]

    def configure(self, broker: KafkaBroker | BrokerProcess) -> None:
        """GSSAPI beside the listener's other mechanisms, with the shared keytab."""
        listener = acl_setup.SASL_LISTENER.lower()
        mechanisms = broker.properties["sasl.enabled.mechanisms"]
        broker.properties = {
            **broker.properties,
            "sasl.enabled.mechanisms": f"{mechanisms},GSSAPI",
            "sasl.kerberos.service.name": SERVICE,
            f"listener.name.{listener}.gssapi.sasl.jaas.config":
                self._jaas(self.service_principal, self.service_keytab)}

    def client_properties(self, user: str) -> dict[str, str]:
        """A Java client's settings to log in as `user` with its keytab."""
        return {"security.protocol": acl_setup.SASL_LISTENER, "sasl.mechanism": "GSSAPI",
                "sasl.kerberos.service.name": SERVICE,
                "sasl.jaas.config": self._jaas(self.principal(user), self.keytab(user))}

    @staticmethod
    def _jaas(principal: str, keytab: Path) -> str:
        return (f'{KRB5_LOGIN_MODULE} required useKeyTab=true storeKey=true '
                f'keyTab="{keytab}" principal="{principal}";')

    def environment(self) -> Mapping[str, str]:
        """Moldau's broker: the realm's krb5.conf, and never the machine's own keytab or
        ticket cache."""
        return {"KRB5_CONFIG": str(self.krb5_conf),
                "KRB5_KTNAME": f"FILE:{self.directory / 'no-default.keytab'}",
                "KRB5CCNAME": f"FILE:{self.directory / 'no-default.ccache'}"}
