"""The command line of the distribution's ZooKeeper-writing tools (scram_user,
access_apply), which Ansible runs: their exit codes, and a parser whose errors exit with
the input code and which takes the ZooKeeper connection as the brokers have it."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

EXIT_OK = 0
EXIT_ZOOKEEPER = 1  # ZooKeeper unreachable, or it refused a read or write
EXIT_INPUT = 2  # the command line or the desired state is wrong: nothing was written


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message}\n")


def zk_tool_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A parser with `--zookeeper` and `--zk-tls-config-file`; the tool adds its own."""
    parser = _Parser(prog=prog, description=description)
    parser.add_argument("--zookeeper", required=True,
                        help="ZooKeeper connect string with the chroot, as the brokers' "
                             "zookeeper.connect")
    parser.add_argument("--zk-tls-config-file",
                        help="properties with the zookeeper.ssl.* client keys (the broker's "
                             "server.properties will do)")
    return parser
