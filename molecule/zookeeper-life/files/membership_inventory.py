#!/usr/bin/env python3
"""A copy of this scenario's Molecule inventory with another zookeeper group, as an
operator edits an inventory before running playbooks/zookeeper-membership.yml. Every
host stays in the inventory (a removed member must be reachable to be stopped).

Usage: membership_inventory.py SOURCE_DIR DEST_DIR HOST[=ID] ...
  HOST: a member of the new zookeeper group; =ID gives it that zookeeper_id
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml


def main(source: str, dest: str, members: list[str]) -> int:
    target = Path(dest)
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    hosts_file = target / "ansible_inventory.yml"
    inventory = yaml.safe_load(hosts_file.read_text())
    every = inventory["all"]["hosts"]
    group = {}
    for member in members:
        host, _, zk_id = member.partition("=")
        group[host] = every[host]
        if zk_id:
            host_vars = target / "host_vars" / host
            values = yaml.safe_load(host_vars.read_text()) if host_vars.exists() else {}
            values["zookeeper_id"] = int(zk_id)
            host_vars.write_text(yaml.safe_dump(values))
    inventory["zookeeper"] = {"hosts": group}
    hosts_file.write_text(yaml.safe_dump(inventory))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
