"""The least a Python asyncio server does per Kafka request: cut size-prefixed frames from
what each read brings and answer each with a small frame, the answers of one read in one
write. The request_cost suite runs it as the floor beside the broker.

Usage: frame_echo.py PORT_FILE. Listens on 127.0.0.1 (a free port, written to PORT_FILE)
until killed.
"""

from __future__ import annotations

import asyncio
import struct
import sys

ANSWER = struct.pack(">i", 56) + bytes(56)  # about a ProduceResponse v9 of one partition


class FrameEcho(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        answers = 0
        while len(self.buffer) >= 4:
            size = struct.unpack_from(">i", self.buffer)[0]
            if len(self.buffer) < 4 + size:
                break
            del self.buffer[:4 + size]
            answers += 1
        if answers and self.transport is not None:
            self.transport.write(ANSWER * answers)


async def serve(port_file: str) -> None:
    server = await asyncio.get_running_loop().create_server(FrameEcho, "127.0.0.1", 0)
    with open(port_file, "w") as fh:
        fh.write(str(server.sockets[0].getsockname()[1]))
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1]))
