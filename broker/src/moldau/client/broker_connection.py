"""An asyncio connection from one broker to another (the controller's channel, the replica
fetchers): requests are pipelined and matched to their responses by correlation id.

Kafka's NetworkClient does the same for its inter-broker traffic; this one negotiates
nothing (the caller picks the versions from inter.broker.protocol.version) and fails every
pending request with ConnectionError when the connection drops, so the caller reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from typing import Any

from moldau.protocol.errors import ProtocolError
from moldau.protocol.headers import decode_response, encode_request
from moldau.protocol.messages.request_header import RequestHeader

_INT32 = struct.Struct(">i")
MAX_RESPONSE = 512 * 1024 * 1024  # beyond any fetch response a broker asks for


class BrokerConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 client_id: str) -> None:
        self.reader = reader
        self.writer = writer
        self.client_id = client_id
        self._correlation = 0
        self._pending: dict[int, tuple[asyncio.Future[Any], int, int]] = {}
        self._closed = False
        self._reader_task = asyncio.ensure_future(self._read_responses())

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str,
                      ssl_context: ssl.SSLContext | None = None,
                      timeout_s: float = 10.0) -> BrokerConnection:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=ssl_context,
                                    server_hostname=host if ssl_context else None,
                                    limit=1 << 20),
            timeout_s)
        return cls(reader, writer, client_id)

    @property
    def closed(self) -> bool:
        return self._closed

    async def request(self, api_key: int, version: int, body: Any,
                      timeout_s: float = 30.0) -> Any:
        """Send one request and wait for its response; ConnectionError when the connection
        fails, TimeoutError (and a closed connection, as Kafka's client does) on timeout."""
        if self._closed:
            raise ConnectionError("connection closed")
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        correlation = self._correlation
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=correlation, client_id=self.client_id)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation] = (future, api_key, version)
        self.writer.write(encode_request(header, body))
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            self.close(f"request {api_key} v{version} timed out after {timeout_s} s")
            raise
        finally:
            self._pending.pop(correlation, None)

    async def _read_responses(self) -> None:
        reason = "closed by the peer"
        try:
            while True:
                size = _INT32.unpack(await self.reader.readexactly(4))[0]
                if not 0 <= size <= MAX_RESPONSE:
                    raise ProtocolError(f"invalid response size {size}")
                frame = await self.reader.readexactly(size)
                correlation = _INT32.unpack_from(frame, 0)[0]
                entry = self._pending.get(correlation)
                if entry is None:
                    continue  # its requester timed out and went away
                future, api_key, version = entry
                _, body = decode_response(frame, api_key, version)
                if not future.done():
                    future.set_result(body)
        except asyncio.CancelledError:
            reason = "closed"
        except (OSError, EOFError, asyncio.IncompleteReadError) as exc:
            reason = f"connection lost: {exc}"
        except ProtocolError as exc:
            reason = f"bad response: {exc}"
        self.close(reason)

    def close(self, reason: str = "closed") -> None:
        if self._closed:
            return
        self._closed = True
        for future, _, _ in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError(reason))
                # its requester may be cancelled at the same time and never look at it
                future.add_done_callback(_retrieve)
        self._pending.clear()
        self._reader_task.cancel()
        with contextlib.suppress(Exception):
            self.writer.close()


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
