"""What idle client connections cost a broker's memory (issue 42, "many connections").

Usage: idle_connections.py HOST PORT BROKER_PID [--steps 5000,15000] [--settle 3]
                           [--batch 40] [--tls]

Opens connections to the broker up to each step's total, each sending one ApiVersions
request (v3, as a Java or librdkafka client opens with) and reading the answer, then
keeps them open and idle; after the last step closes them all. The broker's resident
memory (VmRSS of BROKER_PID) is read before the first connection, once each step is
connected and `--settle` seconds have passed, and after the close (at 1 s and after
`--settle` more seconds). Prints one JSON object:

    {"baseline": bytes, "steps": [{"connections": n, "rss": bytes, "seconds": s}],
     "closed": [{"after_s": s, "rss": bytes}], "failed": n, "first_error": str | null}

Plain blocking sockets, in batches of `--batch`: connect the batch, send every request,
then read every answer, so that the broker sees many connections arriving at once (a
reconnect storm) without this process paying for an event loop per socket. The process
raises its own open-files limit to the hard limit; the broker needs as many descriptors.
With `--tls` every connection makes a TLS handshake first (the broker's certificate is
not verified: what is measured is the broker's side).
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import ssl
import struct
import time
from pathlib import Path

_CLIENT_ID = b"idle-connections"
_API_VERSIONS = 18


def api_versions_request(correlation_id: int) -> bytes:
    """ApiVersions v3 with request header v2: the flexible encoding (compact strings and
    empty tagged-field sections) after the classic header's nullable client id."""
    software_name, software_version = b"moldau-bench", b"1"
    header = struct.pack(">hhih", _API_VERSIONS, 3, correlation_id, len(_CLIENT_ID))
    header += _CLIENT_ID + b"\x00"  # no tagged fields
    body = (bytes([len(software_name) + 1]) + software_name
            + bytes([len(software_version) + 1]) + software_version + b"\x00")
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(remaining)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_response(sock: socket.socket, correlation_id: int) -> None:
    (size,) = struct.unpack(">i", _read_exactly(sock, 4))
    body = _read_exactly(sock, size)
    (got,) = struct.unpack_from(">i", body)
    # ApiVersions answers with response header v0; the body starts with its error code
    (error,) = struct.unpack_from(">h", body, 4)
    if got != correlation_id or error != 0:
        raise ConnectionError(f"ApiVersions answered correlation {got}, error {error}")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ProcessLookupError(f"no VmRSS for process {pid}")


def open_connections(host: str, port: int, count: int, batch: int, first_id: int,
                     errors: list[str], tls: ssl.SSLContext | None = None
                     ) -> list[socket.socket]:
    """`count` connections that each had their ApiVersions answered (failed ones are
    counted in `errors` and closed)."""
    opened: list[socket.socket] = []
    next_id = first_id
    while len(opened) + len(errors) < count:
        wave: list[tuple[socket.socket, int]] = []
        for _ in range(min(batch, count - len(opened) - len(errors))):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(60)
            try:
                sock.connect((host, port))
                if tls is not None:
                    sock = tls.wrap_socket(sock)
                sock.sendall(api_versions_request(next_id))
            except OSError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                sock.close()
                continue
            wave.append((sock, next_id))
            next_id += 1
        for sock, correlation_id in wave:
            try:
                read_response(sock, correlation_id)
            except OSError as exc:  # ConnectionError and timeouts included
                errors.append(f"{type(exc).__name__}: {exc}")
                sock.close()
                continue
            opened.append(sock)
    return opened


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("pid", type=int)
    parser.add_argument("--steps", default="5000,15000",
                        help="connection totals to measure at, ascending")
    parser.add_argument("--settle", type=float, default=3.0)
    # below the listen backlog (Kafka's socket.listen.backlog.size is 50): connects past a
    # full accept queue wait out a SYN retransmission (1 s), which only slows the run
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--tls", action="store_true", help="a TLS handshake first")
    args = parser.parse_args()
    tls = None
    if args.tls:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    steps = [int(n) for n in args.steps.split(",")]
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard != resource.RLIM_INFINITY and steps[-1] + 50 > hard:
        raise SystemExit(f"{steps[-1]} connections need more than this process's open files "
                         f"limit of {hard}")

    errors: list[str] = []
    sockets: list[socket.socket] = []
    result: dict[str, object] = {"baseline": rss_bytes(args.pid)}
    measured = []
    for total in steps:
        began = time.monotonic()
        sockets += open_connections(args.host, args.port, total - len(sockets), args.batch,
                                    len(sockets) + len(errors), errors, tls)
        seconds = time.monotonic() - began
        time.sleep(args.settle)
        measured.append({"connections": len(sockets), "rss": rss_bytes(args.pid),
                         "seconds": round(seconds, 2)})
    for sock in sockets:
        sock.close()
    closed = []
    time.sleep(1.0)
    closed.append({"after_s": 1.0, "rss": rss_bytes(args.pid)})
    time.sleep(args.settle)
    closed.append({"after_s": 1.0 + args.settle, "rss": rss_bytes(args.pid)})
    result.update(steps=measured, closed=closed, failed=len(errors),
                  first_error=errors[0] if errors else None)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
