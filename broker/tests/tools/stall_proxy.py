"""A tiny TCP relay in front of a real broker listener, to make the broker unreachable
for a while as a loaded host or a restart does: "stall" accepts connections and answers
nothing (a TLS handshake then times out), "down" refuses them; both break the
connections already relayed. It relays bytes only; it knows nothing of Kafka."""

from __future__ import annotations

import contextlib
import socket
import threading

from moldau.devcluster.brokers import free_port


class StallProxy:
    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.port = free_port()
        self.mode = "forward"
        self.accepted = 0  # connections accepted, whatever the mode
        self.stalled = 0  # of them, held without an answer
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._listen()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _listen(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed: down
            with self._lock:
                self.accepted += 1
                self._open.append(client)
                if self.mode == "stall":
                    self.stalled += 1
                    continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.append(upstream)
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _break_connections(self) -> None:
        with self._lock:
            sockets, self._open = self._open, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def set_mode(self, mode: str) -> None:
        """forward, stall or down; leaving forward breaks every relayed connection,
        leaving stall drops the held ones."""
        previous, self.mode = self.mode, mode
        if mode == previous:
            return
        self._break_connections()
        if mode == "down" and self._listener is not None:
            # shutdown first: it wakes the thread in accept(), which close() alone does not
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        elif previous == "down":
            self._listen()

    def close(self) -> None:
        self.set_mode("down")
