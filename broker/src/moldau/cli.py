"""`moldau`: the command line entry point (the development cluster now; Kafka's tools
join it with the tools issue)."""

from __future__ import annotations

import argparse
import sys

from moldau.checker.cli import add_checker_parser, run_checker
from moldau.devcluster.cluster import (
    FIRST_BROKER_PORT,
    SASL_PORT_OFFSET,
    DevCluster,
    DevClusterConfigError,
)
from moldau.devcluster.sasl import SASL_CHOICES, DevSaslError
from moldau.tools.registry import TOOLS, run_tool

DEFAULT_DIR = ".moldau-dev"


def _dev_cluster(args: argparse.Namespace) -> int:
    if args.action == "up":
        if args.brokers < 1 or args.zookeepers < 1:
            print("moldau dev-cluster: --brokers and --zookeepers need at least 1",
                  file=sys.stderr)
            return 2
        if args.sasl_port is not None and args.sasl is None:
            print("moldau dev-cluster: --sasl-port needs --sasl", file=sys.stderr)
            return 2
        try:
            cluster = DevCluster.create(args.dir, brokers=args.brokers,
                                        zookeepers=args.zookeepers, first_port=args.port,
                                        sasl=args.sasl, first_sasl_port=args.sasl_port,
                                        authorizer=args.authorizer)
        except DevClusterConfigError as exc:
            print(f"moldau dev-cluster: {exc}", file=sys.stderr)
            return 2
        try:
            cluster.up()
        except DevSaslError as exc:
            print(f"moldau dev-cluster: {exc}", file=sys.stderr)
            return 1
        print("\n".join(cluster.status() + cluster.connection_lines()))
        return 0
    try:
        cluster = DevCluster.load(args.dir)
    except FileNotFoundError as exc:
        print(f"moldau dev-cluster: {exc}", file=sys.stderr)
        return 1
    if args.action == "status":
        print("\n".join(cluster.status() + cluster.connection_lines()))
        return 0
    cluster.down()
    print(f"stopped the development cluster in {cluster.directory}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in and args_in[0] in TOOLS:  # Kafka's tools parse their own flags
        return run_tool(args_in[0], args_in[1:])
    parser = argparse.ArgumentParser(prog="moldau", description="Moldau command line.")
    commands = parser.add_subparsers(dest="command", required=True)
    dev = commands.add_parser("dev-cluster", help="a local ZooKeeper ensemble and brokers")
    dev.add_argument("action", choices=["up", "status", "down"])
    dev.add_argument("--brokers", type=int, default=1,
                     help="number of brokers (default 1; 3 replicate the internal topics "
                     "as Kafka's defaults say)")
    dev.add_argument("--zookeepers", type=int, default=1,
                     help="ZooKeeper nodes (default 1; use an odd number)")
    dev.add_argument("--dir", default=DEFAULT_DIR, help=f"state directory ({DEFAULT_DIR})")
    dev.add_argument("--port", type=int, default=FIRST_BROKER_PORT,
                     help=f"port of the first broker ({FIRST_BROKER_PORT})")
    dev.add_argument("--sasl", choices=SASL_CHOICES,
                     help="also serve clients on a SASL_SSL listener with this mechanism: "
                     "a CA and broker certificate made once in DIR, an admin user with a "
                     "random password, and DIR/client.properties to log in with (Kafka's "
                     "client format). The PLAINTEXT listeners stay open for health checks "
                     "and between brokers. Chosen when the cluster is created; later `up` "
                     "runs keep it")
    dev.add_argument("--authorizer", action="store_true",
                     help="with --sasl: enforce Kafka's ACLs (AclAuthorizer), admin the only "
                     "super user, the brokers talking to each other over SASL_SSL as admin; "
                     "PLAINTEXT clients are User:ANONYMOUS with no rights unless granted")
    dev.add_argument("--sasl-port", type=int, default=None,
                     help="port of the first broker's SASL_SSL listener (--port + "
                     f"{SASL_PORT_OFFSET}, so {FIRST_BROKER_PORT + SASL_PORT_OFFSET})")
    add_checker_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "dev-cluster":
        return _dev_cluster(args)
    if args.command == "checker":
        return run_checker(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
