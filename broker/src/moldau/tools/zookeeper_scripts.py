"""zookeeper-server-start.sh and zookeeper-server-stop.sh with Kafka 3.9's command lines,
for the quick start that runs ZooKeeper next to a broker on one host.

`zookeeper-server-start.sh [-daemon] zookeeper.properties` runs Debian's ZooKeeper
(`java ... org.apache.zookeeper.server.quorum.QuorumPeerMain zookeeper.properties`) with the
JVM options Kafka's kafka-run-class.sh gives it: in the foreground, its log on the console,
or detached with `-daemon`, its console output in $LOG_DIR/zookeeper.out. It honours
KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_GC_LOG_OPTS, KAFKA_JMX_OPTS and JMX_PORT,
KAFKA_LOG4J_OPTS, KAFKA_OPTS, KAFKA_DEBUG, EXTRA_ARGS, LOG_DIR and JAVA_HOME as Kafka does.

`zookeeper-server-stop.sh` sends SIGTERM (or $SIGNAL) to every java QuorumPeerMain process on
the host, as Kafka's does; `zookeeper-server-stop.sh zookeeper.properties` only to those
started with that file (Kafka ignores the argument). On hosts set up by the playbooks,
systemd runs ZooKeeper: use `systemctl`, not these."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from moldau.cluster.zk_ensemble import MAIN_CLASS, ZooKeeperEnsembleError, classpath, find_java
from moldau.tools.server_scripts import process_cmdline

DAEMON_NAME = "zookeeper"
# zookeeper-server-start.sh's `${EXTRA_ARGS-...}`: only an unset EXTRA_ARGS takes this
DEFAULT_EXTRA_ARGS = f"-name {DAEMON_NAME} -loggc"
DEFAULT_HEAP_OPTS = "-Xmx512M -Xms512M"
# kafka-run-class.sh's defaults
DEFAULT_JVM_PERFORMANCE_OPTS = (
    "-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
    "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true")
DEFAULT_JMX_OPTS = ("-Dcom.sun.management.jmxremote "
                    "-Dcom.sun.management.jmxremote.authenticate=false "
                    "-Dcom.sun.management.jmxremote.ssl=false")
JMX_RMI_PORT = "-Dcom.sun.management.jmxremote.rmi.port="
# Kafka's config/log4j.properties as it applies to ZooKeeper's loggers: the console only
# (its file appenders take kafka.* loggers). Written to $LOG_DIR: a pip install has no
# config/ directory to ship it in.
LOG4J_FILE = "zookeeper-log4j.properties"
LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
"""
# ZooKeeper's own exit code for an invalid configuration (ExitCode.INVALID_INVOCATION)
INVALID_CONFIG = 2


@dataclass(frozen=True)
class RunClassOptions:
    """kafka-run-class.sh's leading options; `rest` is what follows them (JVM options,
    given before the main class)."""

    daemon: bool = False
    name: str | None = None
    loggc: bool = False
    rest: tuple[str, ...] = ()

    @classmethod
    def parse(cls, words: Sequence[str]) -> RunClassOptions:
        daemon, name, loggc, i = False, None, False, 0
        while i < len(words):
            if words[i] == "-name" and i + 1 < len(words):
                name, i = words[i + 1], i + 2
            elif words[i] == "-loggc":
                loggc, i = True, i + 1
            elif words[i] == "-daemon":
                daemon, i = True, i + 1
            else:
                break
        return cls(daemon, name, loggc, tuple(words[i:]))


def default_log_dir() -> str:
    """Kafka's `bin/../logs`. In a virtual environment (the usual pip install) the
    environment is the install: <venv>/logs. Elsewhere the prefix (/usr, /usr/local) is
    not the operator's to write, so ./logs, where kafka-server-start.sh writes."""
    if sys.prefix != sys.base_prefix:
        return os.path.join(sys.prefix, "logs")
    return os.path.join(os.getcwd(), "logs")


def _words(env: Mapping[str, str], name: str, default: str = "") -> list[str]:
    """An option variable as the shell splits it; empty counts as unset (`-z`)."""
    return (env.get(name) or default).split()


def jvm_options(env: Mapping[str, str], log_dir: str, opts: RunClassOptions) -> list[str]:
    """Heap, performance, GC log, JMX and log4j options, in kafka-run-class.sh's order."""
    gc = _words(env, "KAFKA_GC_LOG_OPTS")
    if opts.loggc and not gc:  # Java 9+ unified logging: Debian ships Java 17
        gc = [f"-Xlog:gc*:file={log_dir}/{opts.name or DAEMON_NAME}-gc.log:time,tags:"
              "filecount=10,filesize=100M"]
    jmx = _words(env, "KAFKA_JMX_OPTS", DEFAULT_JMX_OPTS)
    jmx_port = env.get("JMX_PORT", "").strip()
    if jmx_port:
        jmx.append(f"-Dcom.sun.management.jmxremote.port={jmx_port}")
        if not any(word.startswith(JMX_RMI_PORT) for word in jmx):
            jmx.append(f"{JMX_RMI_PORT}{jmx_port}")  # one port, as through a container's
    log4j = _words(env, "KAFKA_LOG4J_OPTS") or [
        f"-Dlog4j.configuration=file:{os.path.join(log_dir, LOG4J_FILE)}"]
    return [*_words(env, "KAFKA_HEAP_OPTS", DEFAULT_HEAP_OPTS),
            *_words(env, "KAFKA_JVM_PERFORMANCE_OPTS", DEFAULT_JVM_PERFORMANCE_OPTS),
            *gc, *jmx, f"-Dkafka.logs.dir={log_dir}", *log4j]


def _debug_options(env: Mapping[str, str]) -> list[str]:
    if not env.get("KAFKA_DEBUG"):
        return []
    port = env.get("JAVA_DEBUG_PORT") or "5005"
    suspend = env.get("DEBUG_SUSPEND_FLAG") or "n"
    debug = env.get("JAVA_DEBUG_OPTS") or (
        f"-agentlib:jdwp=transport=dt_socket,server=y,suspend={suspend},address={port}")
    print(f"Enabling Java debug options: {debug}", flush=True)
    return debug.split()


def _config_problem(path: str) -> str | None:
    """Why ZooKeeper would refuse `path`, checked before anything starts: detached,
    ZooKeeper's own complaint would only reach zookeeper.out."""
    if not os.path.exists(path):
        return f"{path} file is missing"  # QuorumPeerConfig's words
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        return f"{path} is not a readable file"
    return None


def _usage(program: str) -> int:
    print(f"USAGE: {program} [-daemon] zookeeper.properties")
    return 1


def start(argv: Sequence[str], program: str = "zookeeper-server-start.sh",
          environ: Mapping[str, str] | None = None) -> int:
    env = dict(os.environ if environ is None else environ)
    args = list(argv)
    if not args:
        return _usage(program)
    extra = env.get("EXTRA_ARGS", DEFAULT_EXTRA_ARGS).split()
    if args[0] == "-daemon":
        extra, args = ["-daemon", *extra], args[1:]
    if not args:
        return _usage(program)
    # One argument is a configuration file; more are QuorumPeerMain's legacy
    # `port dataDir [tickTime maxClientCnxns]` form, which ZooKeeper checks itself.
    problem = _config_problem(args[0]) if len(args) == 1 else None
    if problem is not None:
        print(f"Invalid config, exiting abnormally: {problem}", file=sys.stderr)
        return INVALID_CONFIG
    try:
        java = find_java()
        jars = classpath(None, tls=True)  # Netty too: a secureClientPort needs it
    except ZooKeeperEnsembleError as exc:
        print(f"{program}: {exc}", file=sys.stderr)
        return 1
    opts = RunClassOptions.parse(extra)
    log_dir = env.get("LOG_DIR") or default_log_dir()
    os.makedirs(log_dir, exist_ok=True)
    if not env.get("KAFKA_LOG4J_OPTS"):
        with open(os.path.join(log_dir, LOG4J_FILE), "w") as fh:
            fh.write(LOG4J_PROPERTIES)
    command = [java, *jvm_options(env, log_dir, opts), "-cp", jars,
               *_debug_options(env), *_words(env, "KAFKA_OPTS"), *opts.rest, MAIN_CLASS, *args]
    if not opts.daemon:
        os.execve(java, command, env)  # ZooKeeper takes this process's place, as `exec`
    # Kafka names the console file after -name; without one it has none, this keeps one.
    console = os.path.join(log_dir, f"{opts.name or DAEMON_NAME}.out")
    with open(console, "wb") as out:  # truncated, as the shell's `>`
        subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                         stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return 0


def is_zookeeper(cmdline: Sequence[str]) -> bool:
    """Kafka's `grep java | grep -i QuorumPeerMain` over the process's command line."""
    line = " ".join(cmdline)
    return "java" in line and "quorumpeermain" in line.lower()


def _config_of(pid: int, cmdline: Sequence[str]) -> str | None:
    """The real path of the configuration file a ZooKeeper process was given (its first
    argument after the main class), resolved from the process's working directory."""
    for i, word in enumerate(cmdline[:-1]):
        if word.lower().endswith("quorumpeermain"):
            config = cmdline[i + 1]
            with contextlib.suppress(OSError):  # another user's process: try as it stands
                config = os.path.join(os.readlink(f"/proc/{pid}/cwd"), config)
            return os.path.realpath(config)
    return None


def zookeeper_pids(config: str | None = None) -> list[int]:
    """The ZooKeeper servers on this host; only those started with `config` when given."""
    wanted = os.path.realpath(config) if config is not None else None
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        cmdline = process_cmdline(int(entry))
        if not is_zookeeper(cmdline):
            continue
        if wanted is not None and _config_of(int(entry), cmdline) != wanted:
            continue
        pids.append(int(entry))
    return sorted(pids)


def parse_signal(spec: str) -> signal.Signals | None:
    """A signal as `kill -s` takes it: TERM, SIGTERM or 15."""
    spec = spec.strip().upper()
    try:
        if spec.isdigit():
            return signal.Signals(int(spec))
        return signal.Signals[f"SIG{spec.removeprefix('SIG')}"]
    except (ValueError, KeyError):
        return None


def stop(argv: Sequence[str]) -> int:
    pids = zookeeper_pids(argv[0] if argv else None)
    if not pids:
        print("No zookeeper server to stop")
        return 1
    spec = os.environ.get("SIGNAL") or "TERM"
    signum = parse_signal(spec)
    if signum is None:
        print(f"kill: {spec}: invalid signal specification", file=sys.stderr)
        return 1
    code = 0
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass  # it stopped meanwhile
        except PermissionError:  # e.g. Debian's own ZooKeeper, run as its system user
            print(f"kill: ({pid}) - Operation not permitted", file=sys.stderr)
            code = 1
    return code


def zookeeper_server_start() -> None:
    sys.exit(start(sys.argv[1:], os.path.basename(sys.argv[0])))


def zookeeper_server_stop() -> None:
    sys.exit(stop(sys.argv[1:]))
