"""TCP relays in front of the ZooKeeper nodes, for a broker that the tests cut off from
ZooKeeper while everything else (its clients, the other brokers) still reaches it.

`cut()` makes the relays drop every byte both ways without closing anything (a network
partition: silence, not a reset); `heal()` lets traffic through again. The ZooKeeper
ensemble behind them is the real one; only the path to it is interrupted."""

from __future__ import annotations

import contextlib
import socket
import threading


class PartitionProxy:
    def __init__(self, target_ports: list[int]) -> None:
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.ports = []
        for target in target_ports:
            listener = socket.create_server(("127.0.0.1", 0))
            self._track(listener)
            self.ports.append(listener.getsockname()[1])
            threading.Thread(target=self._accept, args=(listener, target), daemon=True).start()

    @property
    def connect_string(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def cut(self) -> None:
        self._cut.set()

    def heal(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _accept(self, listener: socket.socket, target: int) -> None:
        while not self._closed.is_set():
            try:
                client, _ = listener.accept()
                upstream = socket.create_connection(("127.0.0.1", target), timeout=5)
            except OSError:
                if self._closed.is_set():
                    return
                continue
            upstream.settimeout(None)
            self._track(client)
            self._track(upstream)
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if not self._cut.is_set():  # while cut, bytes vanish
                    dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.close()
