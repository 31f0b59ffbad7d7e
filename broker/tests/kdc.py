"""A throwaway MIT Kerberos KDC for the GSSAPI tests, run as a plain process.

One `krb5kdc` serves two realms on a free loopback port: the main one (`EXAMPLE.TEST`,
the realm of the broker's `kafka/localhost` and of most clients) and a second one
(`OTHER.TEST`) that trusts it both ways, so a principal from a foreign realm can reach the
broker. Principals and keytabs are made with `kadmin.local`, client tickets with `kinit`
into per-client file caches. Every client (the broker, kcat, the Python clients) finds the
realm through the environment of `env()`: KRB5_CONFIG names a krb5.conf written here,
with `rdns = false` and `dns_canonicalize_hostname = false` so that `localhost` stays
`localhost` when a client names the broker's service principal.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

REALM = "EXAMPLE.TEST"
OTHER_REALM = "OTHER.TEST"
_ENCTYPES = "aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal"
_MASTER_PASSWORD = "master-secret"
_TRUST_PASSWORD = "cross-realm-trust-secret"  # the shared key of the two realms' krbtgts
KDC_PROGRAMS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")


def kdc_available() -> bool:
    """Whether MIT Kerberos' KDC and tools are installed (scripts/debian-packages.txt)."""
    return all(shutil.which(p) or Path("/usr/sbin", p).exists() for p in KDC_PROGRAMS)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """preexec_fn: the KDC gets SIGKILL when the test process dies (PR_SET_PDEATHSIG), so
    a killed test run leaves no KDC behind."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def _program(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class TestKdc:
    """Start with `start()`, stop with `stop()`; `env()` is what every Kerberos client of
    the realm needs in its environment."""

    __test__ = False  # a helper, not a test class

    def __init__(self, directory: Path, ticket_lifetime: str = "10h") -> None:
        self.directory = directory
        self.port = _free_port()
        self.krb5_conf = directory / "krb5.conf"
        self.kdc_conf = directory / "kdc.conf"
        self.ticket_lifetime = ticket_lifetime
        self._process: subprocess.Popen[bytes] | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._write_configs()
        for realm in (REALM, OTHER_REALM):
            self._run(_program("kdb5_util"), "-r", realm, "create", "-s",
                      "-P", _MASTER_PASSWORD)
            # the trust: krbtgt/<A>@<B> with the same key in both realms' databases
            for other in (REALM, OTHER_REALM):
                if other != realm:
                    self._kadmin(realm, f"addprinc -pw {_TRUST_PASSWORD} "
                                        f"krbtgt/{realm}@{other}")
                    self._kadmin(realm, f"addprinc -pw {_TRUST_PASSWORD} "
                                        f"krbtgt/{other}@{realm}")
        log = open(self.directory / "krb5kdc.out", "wb")  # noqa: SIM115 (the process owns it)
        self._process = subprocess.Popen(
            [_program("krb5kdc"), "-n", "-r", REALM, "-r", OTHER_REALM, "-P",
             str(self.directory / "krb5kdc.pid")],
            stdout=log, stderr=subprocess.STDOUT, env=self._admin_env(),
            preexec_fn=_die_with_parent)
        log.close()
        self._wait_listening()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._process = None

    def _wait_listening(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError("krb5kdc exited: " + self.log_tail())
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("krb5kdc did not listen in time: " + self.log_tail())

    def log_tail(self, lines: int = 30) -> str:
        text = ""
        for name in ("krb5kdc.out", "krb5kdc.log"):
            path = self.directory / name
            if path.exists():
                text += path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    # --- configuration ---------------------------------------------------------------------

    def _write_configs(self) -> None:
        realms = "\n".join(
            f"  {realm} = {{\n    kdc = 127.0.0.1:{self.port}\n  }}"
            for realm in (REALM, OTHER_REALM))
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {REALM}\n"
            "  dns_lookup_kdc = false\n"
            "  dns_lookup_realm = false\n"
            "  rdns = false\n"
            "  dns_canonicalize_hostname = false\n"
            f"  ticket_lifetime = {self.ticket_lifetime}\n"
            "  udp_preference_limit = 1\n"  # TCP only: the KDC below listens on TCP
            "  forwardable = true\n"
            f"[realms]\n{realms}\n"
            "[domain_realm]\n"
            f"  localhost = {REALM}\n"
            f"  127.0.0.1 = {REALM}\n"
            "[capaths]\n"
            f"  {OTHER_REALM} = {{\n    {REALM} = .\n  }}\n"
            f"  {REALM} = {{\n    {OTHER_REALM} = .\n  }}\n")
        kdc_realms = "\n".join(
            f"  {realm} = {{\n"
            f"    database_name = {self.directory / realm.lower()}/principal\n"
            f"    key_stash_file = {self.directory / realm.lower()}/stash\n"
            f"    acl_file = {self.directory / 'kadm5.acl'}\n"
            f"    max_life = {self.ticket_lifetime}\n"
            "    max_renewable_life = 1d\n"
            f"    supported_enctypes = {_ENCTYPES}\n"
            "  }"
            for realm in (REALM, OTHER_REALM))
        for realm in (REALM, OTHER_REALM):
            (self.directory / realm.lower()).mkdir(exist_ok=True)
        (self.directory / "kadm5.acl").write_text("")
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            f"  kdc_listen = 127.0.0.1:{self.port}\n"
            f"  kdc_tcp_listen = 127.0.0.1:{self.port}\n"
            f"[realms]\n{kdc_realms}\n"
            "[logging]\n"
            f"  kdc = FILE:{self.directory / 'krb5kdc.log'}\n")

    def env(self, ccache: Path | None = None) -> dict[str, str]:
        """The environment of a Kerberos client of the realm (KRB5CCNAME: `ccache`)."""
        out = {"KRB5_CONFIG": str(self.krb5_conf),
               # never the machine's default keytab or cache by accident
               "KRB5_KTNAME": f"FILE:{self.directory / 'no-default.keytab'}",
               "KRB5CCNAME": f"FILE:{ccache or self.directory / 'no-default.ccache'}"}
        return out

    def _admin_env(self) -> dict[str, str]:
        return dict(os.environ, KRB5_CONFIG=str(self.krb5_conf),
                    KRB5_KDC_PROFILE=str(self.kdc_conf))

    def _run(self, *argv: str, env: Mapping[str, str] | None = None) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                              env=dict(env) if env is not None else self._admin_env())
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): "
                               f"{done.stdout}{done.stderr}")
        return done.stdout

    def _kadmin(self, realm: str, query: str) -> str:
        return self._run(_program("kadmin.local"), "-r", realm, "-q", query)

    # --- principals, keytabs, tickets --------------------------------------------------------

    def add_principal(self, principal: str, password: str | None = None) -> str:
        """Create `principal` (`name[/instance]`, in the realm after `@`, else REALM) with a
        random key, or with `password`; returns the full name."""
        full = principal if "@" in principal else f"{principal}@{REALM}"
        realm = full.rsplit("@", 1)[1]
        key = f"-pw {password}" if password is not None else "-randkey"
        self._kadmin(realm, f"addprinc {key} {full}")
        return full

    def export_keytab(self, principal: str, keytab: Path, new_keys: bool = True) -> Path:
        """Append the principal's keys to `keytab`. With `new_keys` kadmin draws new random
        keys first (a keytab exported earlier for the principal goes stale); without, the
        current keys are copied (two brokers of one host sharing `kafka/<host>`)."""
        full = principal if "@" in principal else f"{principal}@{REALM}"
        realm = full.rsplit("@", 1)[1]
        keep = "" if new_keys else "-norandkey "
        self._kadmin(realm, f"ktadd {keep}-k {keytab} {full}")
        return keytab

    def principal_with_keytab(self, principal: str, keytab: Path) -> str:
        full = self.add_principal(principal)
        self.export_keytab(full, keytab)
        return full

    def kinit(self, principal: str, keytab: Path, ccache: Path) -> Path:
        """Fetch a TGT for `principal` from `keytab` into the file cache `ccache`."""
        self._run(_program("kinit"), "-k", "-t", str(keytab), "-c", f"FILE:{ccache}",
                  principal, env=dict(os.environ, **self.env(ccache)))
        return ccache
