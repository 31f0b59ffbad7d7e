"""One process of the SASL suite's connection storm (bench/sasl.py): new connections, each
a full TLS handshake, ApiVersions, SaslHandshake and a SCRAM-SHA-512 exchange (with the
client's PBKDF2 of the password, as every Kafka client does for each new connection),
then closed, with Moldau's own client (moldau.client.broker_connection).

Usage: sasl_storm.py HOST PORT CA_FILE USER PASSWORD CONNECTIONS CONCURRENCY

Prints "ready" once imported and set up, waits for a line "go" on stdin (so that every
storm process starts at once, after their interpreters have started), then opens
CONNECTIONS connections, CONCURRENCY at a time, and prints {"connections", "failed",
"first_error", "started", "finished", "cpu_s", "setup_ms"}: the ones that authenticated,
the ones that did not (and the first reason), CLOCK_MONOTONIC seconds of the first
connect and of the last close, this process's CPU seconds over the storm, and the
connections' setup times (connect to authenticated) in milliseconds.
"""

from __future__ import annotations

import asyncio
import json
import resource
import ssl
import sys
import time
from pathlib import Path

# bench/drivers/ -> the repository -> broker/src: run as a script, not as an installed module
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "broker" / "src"))

from moldau.client.broker_connection import BrokerConnection
from moldau.security.sasl.scram import ScramClient
from moldau.security.sasl.scram_credentials import ScramMechanism

CONNECT_TIMEOUT_S = 60.0  # a storm queues handshakes: the broker answers them in turn


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def storm(host: str, port: int, context: ssl.SSLContext, user: str, password: str,
                connections: int, concurrency: int) -> dict[str, object]:
    setup_ms: list[float] = []
    errors: list[str] = []
    remaining = iter(range(connections))

    def scram() -> ScramClient:
        return ScramClient(ScramMechanism.SCRAM_SHA_512, user, password)

    async def worker() -> None:
        for _ in remaining:  # the workers share one iterator: each takes the next number
            began = time.monotonic()
            try:
                connection = await BrokerConnection.connect(
                    host, port, client_id="moldau-bench-sasl-storm", ssl_context=context,
                    timeout_s=CONNECT_TIMEOUT_S, sasl=scram)
            except (TimeoutError, OSError) as exc:  # ConnectionError included
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            setup_ms.append((time.monotonic() - began) * 1000)
            connection.close("storm: authenticated, closing")

    cpu0, started = _cpu_seconds(), time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    finished = time.monotonic()
    await asyncio.sleep(0.05)  # let the transports send their TLS close and shut
    return {"connections": len(setup_ms), "failed": len(errors),
            "first_error": errors[0] if errors else None, "started": started,
            "finished": finished, "cpu_s": _cpu_seconds() - cpu0, "setup_ms": setup_ms}


def main(argv: list[str]) -> None:
    host, port, ca_file, user, password, connections, concurrency = argv
    context = ssl.create_default_context(cafile=ca_file)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("sasl_storm: expected 'go' on stdin")
    result = asyncio.run(storm(host, int(port), context, user, password, int(connections),
                               int(concurrency)))
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
