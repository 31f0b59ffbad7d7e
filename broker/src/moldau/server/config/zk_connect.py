"""`zookeeper.connect`: the ensemble's hosts and the optional chroot."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError


@dataclass(frozen=True)
class ZkConnect:
    hosts: tuple[tuple[str, int], ...]
    chroot: str | None

    @property
    def connect_string(self) -> str:
        """The host list without the chroot (what kazoo's `hosts` takes)."""
        return ",".join(f"{h}:{p}" for h, p in self.hosts)


def parse_zk_connect(key: str, text: str) -> ZkConnect:
    stripped = text.strip()
    slash = stripped.find("/")
    hosts_part, chroot = (stripped, None) if slash < 0 else (stripped[:slash], stripped[slash:])
    if chroot is not None:
        if chroot == "/":
            chroot = None
        elif chroot.endswith("/") or "//" in chroot:
            raise ConfigError(key, text, f"invalid chroot path {chroot}")
    hosts: list[tuple[str, int]] = []
    for item in (s.strip() for s in hosts_part.split(",")):
        host, sep, port = item.rpartition(":")
        if not item:
            raise ConfigError(key, text, "empty host in the connection string")
        if not sep:
            host, port = item, "2181"
        if not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ConfigError(key, text, f"'{item}' is not host:port")
        hosts.append((host.strip("[]"), int(port)))
    return ZkConnect(tuple(hosts), chroot)
