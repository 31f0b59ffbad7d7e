"""The client side of the file-response tests (test_sendfile_responses.py over plaintext,
test_tls_file_responses.py over TLS): a request frame of the tests' toy protocol, and a
reader slow enough that the broker's socket fills."""

from __future__ import annotations

import asyncio
import hashlib
import struct


def send_request(writer: asyncio.StreamWriter, correlation: int, kind: bytes) -> None:
    body = struct.pack(">hhi", 0, 0, correlation) + kind  # api key, version, correlation id
    writer.write(struct.pack(">i", len(body)) + body)


async def read_slowly(reader: asyncio.StreamReader, size: int) -> bytes:
    """The response's digest, read 64 KiB at a time with pauses (the socket fills)."""
    digest = hashlib.sha256()
    left = size
    while left:
        chunk = await asyncio.wait_for(reader.read(min(left, 64 * 1024)), 10)
        if not chunk:
            raise EOFError(f"{left} bytes short")
        digest.update(chunk)
        left -= len(chunk)
        await asyncio.sleep(0.001)
    return digest.digest()
