#!/usr/bin/env python3
"""The steps of a ZooKeeper membership change (playbooks/zookeeper-membership.yml,
docs/operations.md "ZooKeeper membership changes"): from the ensemble the leader runs to
the one the inventory's zookeeper group names, one member at a time.

ZooKeeper 3.8 runs here with a static configuration (no dynamic reconfig): each member
counts a quorum over the server.N lines of its own zoo.cfg. A change is therefore a roll:
the members restart one at a time with the next server list, and the ensemble stays up
only if, at every restart, a majority of the list the leader holds and a majority of the
list the restarted members hold are running. One step adds, removes or replaces one
member, so the two lists differ by one server and both majorities can be kept:

- replace (a server.N moves to another host, same id): the old host is stopped and its
  data retired first (two members with one id must never run), the new host starts empty
  with the new list and syncs from the leader, then the others roll. This is how a dead
  member is replaced: the ensemble never has fewer members than before.
- add: the new member starts first with the new list and joins the leader (a leader
  accepts a follower its own list lacks), then the others roll, followers first, the
  leader last.
- remove: a leaving leader hands over first (a member whose list lacks the leader cannot
  follow it), the remaining members roll with the shorter list, then the leaving member
  stops (stopping it first would leave a 4-member list with 3 running, and the first
  restart would lose the quorum), and its data is retired.

Order: steps for members that do not serve (dead) first, then replacements, additions,
removals (the leader last), so the ensemble is at its largest in the middle. Refused,
with nothing changed: no single leader, a member down that the change does not handle,
a step whose restarts would lose a majority, a target under 3 members or with duplicate
ids, a joining host with ZooKeeper data, a retired id (ids of removed members are never
reused). An even target size is allowed with a warning.

Standard library only. Usage: zookeeper_membership_plan.py < state.json (what the
playbook read, see `from_states`); prints {"steps": [...], ...} or {"error": "..."}.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

SERVING = ("leader", "follower")


class PlanError(Exception):
    """A change this playbook refuses; nothing was changed."""


@dataclass(frozen=True)
class Server:
    """One server.N line: its id, quorum address and inventory host (None: not in it)."""

    id: int
    address: str
    host: str | None

    def describe(self) -> str:
        return f"server.{self.id} ({self.host or 'not in the inventory'}, {self.address})"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "address": self.address, "host": self.host}


@dataclass(frozen=True)
class Joiner:
    """A target member: its server line, and what its host holds now."""

    server: Server
    has_data: bool  # a version-2 directory with files under its data or log dir
    myid: int | None  # the myid file of its host, if any
    serving: bool = False  # its ZooKeeper answers srvr as leader or follower now


def majority(size: int) -> int:
    return size // 2 + 1


def _check_target(target: list[Joiner], retired: set[int]) -> None:
    ids = [j.server.id for j in target]
    if len(target) < 3:
        raise PlanError(
            f"the zookeeper group names {len(target)} member(s): this playbook keeps "
            "an ensemble of at least 3 (fewer survive no failure)"
        )
    bad = [i for i in ids if not 1 <= i <= 255]
    if bad:
        raise PlanError(f"zookeeper_id must be in 1..255: {bad}")
    if len(set(ids)) != len(ids):
        raise PlanError(f"zookeeper_id repeats in the zookeeper group: {sorted(ids)}")
    addresses = [j.server.address for j in target]
    if len(set(addresses)) != len(addresses):
        raise PlanError(f"two members of the zookeeper group share an address: {sorted(addresses)}")
    reused = sorted(set(ids) & retired)
    if reused:
        raise PlanError(
            f"zookeeper_id {reused} belonged to removed members and is retired (a removed "
            f"id is never reused); retired ids: {sorted(retired)}. Give the host a new id"
        )


def _check_current(current: list[Server], modes: dict[int, str]) -> None:
    leaders = [s for s in current if modes.get(s.id) == "leader"]
    if len(current) < 3:
        raise PlanError(
            f"the running ensemble has {len(current)} member(s): this playbook changes "
            "ensembles of at least 3 (a single server runs standalone)"
        )
    if len(leaders) != 1:
        described = ", ".join(f"{s.describe()}: {modes.get(s.id) or 'no answer'}" for s in current)
        raise PlanError(
            f"the running ensemble has {len(leaders)} leaders, not one ({described}): "
            "no change without a quorum"
        )


def _safe(
    kind: str, before: list[Server], after: list[Server], dead: set[int], handled: Server
) -> str | None:
    """Why the step would lose a majority during its restarts, or None. `dead`: ids of
    members not serving, the handled one included if it is down."""
    others_dead = dead - {handled.id}
    live_before = (
        len(before) - len(others_dead) - (1 if kind == "remove" and handled.id in dead else 0)
    )
    live_after = len(after) - len(others_dead & {s.id for s in after})
    # each restart takes one running member away from both lists
    if live_before - 1 < majority(len(before)):
        return (
            f"with {len(before) - live_before} of {len(before)} members down, restarting "
            f"one more leaves {live_before - 1}, under the majority of {majority(len(before))}"
        )
    if live_after - 1 < majority(len(after)):
        return (
            f"the new list of {len(after)} would have {live_after - 1} running during a "
            f"restart, under its majority of {majority(len(after))}"
        )
    return None


def plan(
    current: list[Server],
    modes: dict[int, str],
    target: list[Joiner],
    retired: set[int],
    strays: tuple[Server, ...] = (),
) -> dict[str, Any]:
    """The steps from `current` (the leader's server list; modes: srvr Mode per id, '' for
    no answer) to `target` (the zookeeper group). `strays`: hosts outside both that still
    hold a member's myid (a removal interrupted after the roll): retired first, no roll
    needed since no member lists them. Raises PlanError for a refused change."""
    _check_target(target, retired)
    _check_current(current, modes)
    now = {s.id: s for s in current}
    wanted = {j.server.id: j for j in target}
    dead = {s.id for s in current if modes.get(s.id) not in SERVING}
    by_address = {s.address: s for s in current}
    for j in target:
        there = by_address.get(j.server.address)
        if there is not None and there.id != j.server.id:
            raise PlanError(
                f"{j.server.host} runs {there.describe()} but the inventory gives it "
                f"zookeeper_id {j.server.id}: a member keeps its id (remove it, then add "
                "a host with a new id)"
            )

    replaced = [
        i for i in sorted(wanted) if i in now and now[i].address != wanted[i].server.address
    ]
    added = [i for i in sorted(wanted) if i not in now]
    removed = [i for i in sorted(now) if i not in wanted]
    for i in replaced + added:
        j = wanted[i]
        if j.serving and j.myid == i:
            continue  # joined in an earlier, interrupted run: the step goes on from there
        if j.has_data or (j.myid is not None and j.myid != i):
            raise PlanError(
                f"{j.server.host} is to join as server.{i} but holds ZooKeeper data "
                f"(myid {j.myid}, version-2 data {'present' if j.has_data else 'absent'}): "
                "a joining member starts empty; retire that data first"
            )
    unhandled = sorted(dead - set(replaced) - set(removed))
    if unhandled:
        raise PlanError(
            "not serving: "
            + ", ".join(now[i].describe() for i in unhandled)
            + ". Bring it back, or replace it in place (a new host with its zookeeper_id), "
            "before changing the membership"
        )

    leader = next(s.id for s in current if modes.get(s.id) == "leader")
    order = (
        [("replace", i) for i in replaced if i in dead]
        + [("remove", i) for i in removed if i in dead]
        + [("replace", i) for i in replaced if i not in dead]
        + [("add", i) for i in added]
        + [("remove", i) for i in removed if i not in dead and i != leader]
        + [("remove", i) for i in removed if i == leader]
    )
    ensemble = sorted(current, key=lambda s: s.id)
    steps: list[dict[str, Any]] = [
        {
            "kind": "retire",
            "id": stray.id,
            "join": None,
            "leave": stray.host,
            "leave_serving": False,
            "before": [s.to_json() for s in ensemble],
            "servers": [s.to_json() for s in ensemble],
            "summary": f"retire {stray.describe()}: it left the ensemble in an interrupted run",
        }
        for stray in strays
    ]
    for kind, i in order:
        if kind == "add":
            handled = wanted[i].server
            after = sorted([*ensemble, handled], key=lambda s: s.id)
        elif kind == "remove":
            handled = now[i]
            after = [s for s in ensemble if s.id != i]
        else:
            handled = wanted[i].server
            after = [handled if s.id == i else s for s in ensemble]
        why = _safe(kind, ensemble, after, dead, handled)
        if why:
            hint = (
                " Replace it in place instead (a new host with its zookeeper_id)."
                if i in dead
                else ""
            )
            raise PlanError(f"{kind} {handled.describe()} refused: {why}.{hint}")
        steps.append(
            {
                "kind": kind,
                "id": i,
                "join": handled.host if kind != "remove" else None,
                "leave": now[i].host if kind != "add" else None,
                "leave_serving": i in now and i not in dead,
                "before": [s.to_json() for s in ensemble],
                "servers": [s.to_json() for s in after],
                "summary": (
                    f"{kind} {handled.describe()}"
                    + (f" in place of {now[i].host or now[i].address}" if kind == "replace" else "")
                    + f": {len(ensemble)} -> {len(after)} members"
                    + (
                        " (even: tolerates no more failures than one fewer)"
                        if len(after) % 2 == 0
                        else ""
                    )
                ),
            }
        )
        ensemble = after
        dead.discard(i)

    warnings = []
    if len(target) % 2 == 0:
        warnings.append(
            f"the zookeeper group names {len(target)} members, an even number: it tolerates "
            f"{(len(target) - 1) // 2} failure(s), as {len(target) - 1} members would"
        )
    for step in steps:
        gone = step["leave"] is None and step["kind"] != "add"
        if gone:
            warnings.append(
                f"server.{step['id']} ({now[step['id']].address}) is not in the inventory: it "
                "is not stopped and its data is not retired; it must never start again"
            )
    return {
        "steps": steps,
        "joiners": [s["join"] for s in steps if s["join"]],
        "leaving": [s["leave"] for s in steps if s["leave"]],
        "warnings": warnings,
        # a stray holding a kept id (a replaced member's old host back) leaves it in use
        "retired": sorted(
            retired | set(removed) | {x.id for x in strays if x.id not in {*now, *wanted}}
        ),
        "summary": [s["summary"] for s in steps]
        or ["nothing to do: the running ensemble is the zookeeper group"],
    }


def from_states(
    state: dict[str, Any],
) -> tuple[list[Server], dict[int, str], list[Joiner], set[int]]:
    """The planner's arguments from what the playbook read: `group` {host: zookeeper_id}
    (the zookeeper group, in its order), `addresses` {host: address} (every inventory host
    that may be a member, the group's included), `states` {host: the answer of
    zookeeper_member_state.py} (the hosts that answered). The running ensemble is the
    leader's server list (members may disagree after an interrupted run: the leader's is
    the one in force)."""
    states: dict[str, dict[str, Any]] = state["states"]
    hosts_by_address = {address: host for host, address in state["addresses"].items() if address}
    lists = [s["servers"] for s in states.values() if s.get("mode") == "leader"]
    lists += [s["servers"] for s in states.values() if s.get("servers")]
    current = [
        Server(int(s["id"]), str(s["address"]), hosts_by_address.get(str(s["address"])))
        for s in (lists[0] if lists else [])
    ]
    modes = {s.id: str(states.get(s.host or "", {}).get("mode") or "") for s in current}
    target = []
    for host, zk_id in state["group"].items():
        held = states.get(host, {})
        myid = str(held.get("myid") or "").strip()
        target.append(
            Joiner(
                Server(int(zk_id), str(state["addresses"].get(host) or ""), host),
                bool(held.get("has_data")),
                int(myid) if myid.isdigit() else None,
                held.get("mode") in SERVING,
            )
        )
    retired = {int(i) for s in states.values() for i in s.get("retired", [])}
    return current, modes, target, retired


def strays_of(state: dict[str, Any], current: list[Server]) -> tuple[Server, ...]:
    """Hosts that answered, outside the zookeeper group and the running ensemble, that
    still hold a myid: members whose removal stopped before they were retired."""
    listed = {s.host for s in current} | set(state["group"])
    return tuple(
        Server(int(held["myid"]), str(state["addresses"].get(host) or ""), host)
        for host, held in sorted(state["states"].items())
        if host not in listed and str(held.get("myid") or "").strip().isdigit()
    )


def main() -> int:
    try:
        state = json.load(sys.stdin)
        args = from_states(state)
        result = plan(*args, strays=strays_of(state, args[0]))
        result["reachable"] = sorted(state["states"])
        print(json.dumps(result))
    except PlanError as refused:
        print(json.dumps({"error": str(refused)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
