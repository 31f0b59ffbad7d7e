"""kafka-server-start.sh and kafka-server-stop.sh for Moldau brokers, with Kafka 3.9's
command lines: `kafka-server-start.sh [-daemon] server.properties [--override k=v]*`
runs `moldau-server` in the foreground (or detached, its console output in
$LOG_DIR/kafkaServer.out), and `kafka-server-stop.sh [--node-id=N]` sends SIGTERM (or
$SIGNAL) to the brokers running on this host, only the one whose server.properties sets
`broker.id` (or `node.id`) N when given. On hosts set up by the playbooks, systemd runs the
brokers: use `systemctl`, not these."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from moldau import properties
from moldau.metrics.http import METRICS_PORT_ENV

SERVER_MODULE = "moldau.server.main"
DAEMON_NAME = "kafkaServer"


def _usage(program: str) -> int:
    print(f"USAGE: {program} [-daemon] server.properties [--override property=value]*")
    return 1


def start(argv: list[str], program: str = "kafka-server-start.sh") -> int:
    if not argv:
        return _usage(program)
    daemon = argv[0] == "-daemon"
    args = argv[1:] if daemon else argv
    if not args:
        return _usage(program)
    command = [sys.executable, "-m", SERVER_MODULE, *args]
    env, notes = metrics_environment(dict(os.environ))
    if not daemon:
        for note in notes:
            print(note, file=sys.stderr)
        os.execve(sys.executable, command, env)  # the broker takes this process's place
    log_dir = os.environ.get("LOG_DIR") or os.path.join(os.getcwd(), "logs")
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, f"{DAEMON_NAME}.out"), "ab") as out:
        out.write("".join(f"{note}\n" for note in notes).encode())
        out.flush()
        subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    return 0


def metrics_environment(env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Kafka's JMX settings as Moldau can honour them: Moldau has no JVM and no JMX; it
    serves its MBeans as JSON on MOLDAU_METRICS_PORT (/jmx), so JMX_PORT names that port
    when MOLDAU_METRICS_PORT does not. The environment for the broker, and what to tell
    the operator about it."""
    notes = []
    jmx_port = env.get("JMX_PORT", "").strip()
    if jmx_port and not env.get(METRICS_PORT_ENV):
        env[METRICS_PORT_ENV] = jmx_port
        notes.append(f"JMX_PORT={jmx_port}: Moldau has no JMX; it serves its metrics as JSON "
                     f"on http://127.0.0.1:{jmx_port}/jmx instead ({METRICS_PORT_ENV}, "
                     f"docs/metrics.md)")
    elif jmx_port:
        notes.append(f"JMX_PORT={jmx_port} is ignored: {METRICS_PORT_ENV}="
                     f"{env[METRICS_PORT_ENV]} names the port of Moldau's metrics (/jmx)")
    if env.get("KAFKA_JMX_OPTS", "").strip():
        notes.append("KAFKA_JMX_OPTS is ignored: Moldau has no JVM; its metrics are JSON on "
                     f"{METRICS_PORT_ENV} (docs/metrics.md)")
    return env, notes


def process_cmdline(pid: int) -> list[str]:
    """A process's command line from /proc (empty when it is gone or not ours to read)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [part.decode("utf-8", "replace") for part in fh.read().split(b"\0") if part]
    except OSError:
        return []


def _config_path(pid: int, cmdline: list[str]) -> str | None:
    """The server.properties argument of a broker process, resolved from its cwd."""
    after = cmdline[cmdline.index(SERVER_MODULE) + 1:] if SERVER_MODULE in cmdline \
        else cmdline[1:]
    for arg in after:
        if not arg.startswith("-") and arg.endswith(".properties"):
            try:
                return os.path.join(os.readlink(f"/proc/{pid}/cwd"), arg)
            except OSError:
                return arg
    return None


def _node_id(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        props = properties.load(path)
    except (OSError, properties.PropertiesError):
        return None
    found = props.get("broker.id", props.get("node.id"))
    return found.strip() if found is not None else None  # Kafka trims int settings


def broker_pids(node_id: str | None = None) -> list[int]:
    """Moldau brokers running on this host (`moldau-server` or `-m moldau.server.main`)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        cmdline = process_cmdline(int(entry))
        is_broker = SERVER_MODULE in cmdline or any(
            os.path.basename(part) == "moldau-server" for part in cmdline[:2])
        if not is_broker:
            continue
        if node_id is not None and _node_id(_config_path(int(entry), cmdline)) != node_id:
            continue
        pids.append(int(entry))
    return sorted(pids)


def stop(argv: list[str]) -> int:
    node_id = None
    for arg in argv:
        if arg.startswith("--node-id="):
            node_id = arg.split("=", 1)[1]
        elif arg.startswith("--process-role="):
            pass  # KRaft roles: every Moldau broker is a ZooKeeper-mode broker
    pids = broker_pids(node_id)
    if not pids:
        print("No kafka server to stop")
        return 1
    name = os.environ.get("SIGNAL", "TERM").upper().removeprefix("SIG")
    try:
        signum = signal.Signals[f"SIG{name}"]
    except KeyError:
        print(f"kill: unknown signal {name}", file=sys.stderr)
        return 1
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # it stopped meanwhile
            os.kill(pid, signum)
    return 0


def kafka_server_start() -> None:
    sys.exit(start(sys.argv[1:], os.path.basename(sys.argv[0])))


def kafka_server_stop() -> None:
    sys.exit(stop(sys.argv[1:]))
