#!/usr/bin/env python3
"""What a host holds of ZooKeeper, for playbooks/zookeeper-membership.yml: its srvr Mode,
myid, the server.N lines of its zoo.cfg, whether its data or log dir has version-2 files,
and the retired ids recorded beside zoo.cfg. Read-only; prints one JSON object.

Usage: zookeeper_member_state.py CONF_DIR DATA_DIR LOG_DIR CLIENT_PORT
Standard library only: it runs with the host's /usr/bin/python3 (a new host has no more).
"""

from __future__ import annotations

import json
import re
import socket
import sys
from pathlib import Path

SERVER_LINE = re.compile(r"^server\.(\d+)=([^:]+):")
RETIRED_FILE = "retired-ids"  # one retired id a line (written by zookeeper-membership.yml)


def srvr_mode(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
            sock.sendall(b"srvr")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
    except OSError:
        return ""
    match = re.search(rb"^Mode: (\S+)", answer, re.MULTILINE)
    return match.group(1).decode() if match else ""


def main(conf_dir: str, data_dir: str, log_dir: str, port: str) -> int:
    conf = Path(conf_dir)
    cfg = conf / "zoo.cfg"
    servers = []
    if cfg.is_file():
        for line in cfg.read_text().splitlines():
            match = SERVER_LINE.match(line.strip())
            if match:
                servers.append({"id": int(match.group(1)), "address": match.group(2)})
    myid = Path(data_dir) / "myid"
    retired = conf / RETIRED_FILE
    print(
        json.dumps(
            {
                "mode": srvr_mode(int(port)),
                "myid": myid.read_text().strip() if myid.is_file() else None,
                "servers": servers,
                "has_data": any(
                    p.is_file()
                    for d in (data_dir, log_dir)
                    for p in (Path(d) / "version-2").glob("*")
                ),
                "retired": sorted(
                    {
                        int(line.split()[0])
                        for line in retired.read_text().splitlines()
                        if line.split() and line.split()[0].isdigit()
                    }
                )
                if retired.is_file()
                else [],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
