"""The planner of playbooks/zookeeper-membership.yml (playbooks/files/zookeeper_membership_plan.py):
the order of its steps (one member each, replacements of dead members first, additions
before removals, the leader removed last), that no step's restarts could lose a majority
of either server list, and its refusals. The state probe it reads
(roles/zookeeper/files/zookeeper_member_state.py) runs here on a laid-out member's
directories. Real ensembles going 3 -> 5 -> 3 and a replacement are the zookeeper-life
Molecule scenario's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "playbooks" / "files"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "zookeeper" / "files"))

import zookeeper_member_state
import zookeeper_membership_plan as planner
from zookeeper_membership_plan import Joiner, PlanError, Server

ROOT = Path(__file__).resolve().parents[2]


def server(i: int, host: str | None = "") -> Server:
    return Server(i, f"10.0.0.{i}", f"zk{i}" if host == "" else host)


def ensemble(*ids: int) -> list[Server]:
    return [server(i) for i in ids]


def group(*ids: int, fresh: bool = True) -> list[Joiner]:
    """The zookeeper group: existing members hold data and their myid; new ones nothing."""
    return [Joiner(server(i), has_data=not fresh, myid=None if fresh else i) for i in ids]


def members(*ids: int) -> list[Joiner]:
    return [Joiner(server(i), has_data=True, myid=i, serving=True) for i in ids]


def modes(leader: int, *ids: int, down: tuple[int, ...] = ()) -> dict[int, str]:
    return {i: "" if i in down else ("leader" if i == leader else "follower") for i in ids}


def steps(result: dict) -> list[tuple[str, int, int]]:
    return [(s["kind"], s["id"], len(s["servers"])) for s in result["steps"]]


def test_growing_3_to_5_adds_one_member_a_step() -> None:
    result = planner.plan(
        ensemble(1, 2, 3), modes(2, 1, 2, 3), members(1, 2, 3) + group(4, 5), set()
    )
    assert steps(result) == [("add", 4, 4), ("add", 5, 5)]
    first, second = result["steps"]
    assert first["join"] == "zk4" and first["leave"] is None
    assert [s["id"] for s in first["before"]] == [1, 2, 3]
    assert [s["id"] for s in second["before"]] == [1, 2, 3, 4]
    assert "even" in first["summary"] and "even" not in second["summary"]
    assert result["joiners"] == ["zk4", "zk5"] and result["warnings"] == []


def test_shrinking_5_to_3_removes_the_leader_last() -> None:
    result = planner.plan(ensemble(1, 2, 3, 4, 5), modes(4, 1, 2, 3, 4, 5), members(1, 2, 3), set())
    assert steps(result) == [("remove", 5, 4), ("remove", 4, 3)]
    assert result["leaving"] == ["zk5", "zk4"]
    assert result["retired"] == [4, 5]


def test_swapping_a_live_member_adds_before_it_removes() -> None:
    target = members(1, 3) + group(6)
    result = planner.plan(ensemble(1, 2, 3), modes(1, 1, 2, 3), target, set())
    assert steps(result) == [("add", 6, 4), ("remove", 2, 3)]


def test_a_dead_member_is_replaced_in_place_first() -> None:
    target = [*members(1, 3), Joiner(Server(2, "10.0.0.9", "zk9"), has_data=False, myid=None)]
    result = planner.plan(ensemble(1, 2, 3), modes(1, 1, 2, 3, down=(2,)), target, set())
    assert steps(result) == [("replace", 2, 3)]
    step = result["steps"][0]
    assert (step["join"], step["leave"], step["leave_serving"]) == ("zk9", "zk2", False)
    assert {s["id"]: s["address"] for s in step["servers"]}[2] == "10.0.0.9"


def test_a_dead_member_cannot_be_removed_from_3_or_4() -> None:
    for size in (3, 4):
        ids = tuple(range(1, size + 1))
        with pytest.raises(PlanError, match="Replace it in place"):
            planner.plan(
                ensemble(*ids),
                modes(1, *ids, down=(size,)),
                members(*ids[:-1]) + (group(9) if size == 3 else []),
                set(),
            )


def test_a_dead_member_of_5_is_removed_before_anything_else() -> None:
    result = planner.plan(
        ensemble(1, 2, 3, 4, 5),
        modes(1, 1, 2, 3, 4, 5, down=(3,)),
        members(1, 2, 4, 5) + group(6),
        set(),
    )
    assert steps(result) == [("remove", 3, 4), ("add", 6, 5)]


def test_a_member_down_that_the_change_does_not_handle_is_refused() -> None:
    with pytest.raises(PlanError, match=r"not serving: server\.3"):
        planner.plan(
            ensemble(1, 2, 3), modes(1, 1, 2, 3, down=(3,)), members(1, 2, 3) + group(4), set()
        )


def test_no_leader_is_refused() -> None:
    with pytest.raises(PlanError, match="0 leaders"):
        planner.plan(ensemble(1, 2, 3), {1: "", 2: "", 3: ""}, members(1, 2, 3) + group(4), set())


@pytest.mark.parametrize(
    "target, message",
    [
        (members(1, 2), "at least 3"),
        ([*members(1, 2, 3), Joiner(Server(3, "10.0.0.7", "zk7"), False, None)], "repeats"),
        ([*members(1, 2, 3), Joiner(Server(300, "10.0.0.7", "zk7"), False, None)], "1..255"),
        (
            [*members(1, 2, 3), Joiner(Server(7, "10.0.0.3", "zk7"), False, None)],
            "share an address",
        ),
    ],
)
def test_bad_groups_are_refused(target: list[Joiner], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        planner.plan(ensemble(1, 2, 3), modes(1, 1, 2, 3), target, set())


def test_a_retired_id_is_never_reused() -> None:
    with pytest.raises(PlanError, match=r"zookeeper_id \[4\] belonged to removed members"):
        planner.plan(ensemble(1, 2, 3), modes(1, 1, 2, 3), members(1, 2, 3) + group(4), {4, 5})


def test_a_joining_host_with_data_is_refused() -> None:
    with pytest.raises(PlanError, match="holds ZooKeeper data"):
        planner.plan(
            ensemble(1, 2, 3), modes(1, 1, 2, 3), members(1, 2, 3) + group(4, fresh=False), set()
        )


def test_a_member_given_another_id_is_refused() -> None:
    target = [*members(1, 3), Joiner(Server(7, "10.0.0.2", "zk2"), True, 2, True)]
    with pytest.raises(PlanError, match="a member keeps its id"):
        planner.plan(ensemble(1, 2, 3), modes(1, 1, 2, 3), target, set())


def test_a_joiner_already_serving_goes_on_after_an_interrupted_run() -> None:
    joined = Joiner(server(4), has_data=True, myid=4, serving=True)
    result = planner.plan(ensemble(1, 2, 3), modes(1, 1, 2, 3), [*members(1, 2, 3), joined], set())
    assert steps(result) == [("add", 4, 4)]


def test_an_even_group_is_allowed_with_a_warning() -> None:
    result = planner.plan(ensemble(1, 2, 3), modes(1, 1, 2, 3), members(1, 2, 3) + group(4), set())
    assert steps(result) == [("add", 4, 4)]
    assert "even number" in result["warnings"][0]


def test_nothing_to_do() -> None:
    result = planner.plan(ensemble(1, 2, 3), modes(3, 1, 2, 3), members(1, 2, 3), {4})
    assert result["steps"] == [] and "nothing to do" in result["summary"][0]


def test_a_member_outside_the_inventory_is_removed_with_a_warning() -> None:
    current = [*ensemble(1, 2, 3, 4), server(5, host=None)]
    result = planner.plan(current, modes(1, 1, 2, 3, 4, 5), members(1, 2, 3, 4) + group(6), set())
    assert steps(result) == [("add", 6, 6), ("remove", 5, 5)]
    assert "not in the inventory" in result["warnings"][-1]


@pytest.mark.parametrize("kind_sizes", [(3, 5), (5, 3), (3, 3), (5, 7), (7, 3)])
def test_every_step_keeps_both_majorities(kind_sizes: tuple[int, int]) -> None:
    """Each step changes one member, and while any one running member restarts, a
    majority of the old and of the new list still runs (no member down)."""
    old_size, new_size = kind_sizes
    old = tuple(range(1, old_size + 1))
    new = tuple(range(1, min(old_size, new_size) + 1)) + tuple(
        range(10, 10 + max(0, new_size - old_size))
    )
    result = planner.plan(
        ensemble(*old),
        modes(1, *old),
        members(*[i for i in new if i in old]) + group(*[i for i in new if i not in old]),
        set(),
    )
    assert [s["servers"] for s in result["steps"][-1:]] == [
        [server(i).to_json() for i in sorted(new)]
    ] or not result["steps"]
    for step in result["steps"]:
        before, after = len(step["before"]), len(step["servers"])
        assert abs(before - after) <= 1
        changed = {s["id"] for s in step["before"]} ^ {s["id"] for s in step["servers"]}
        assert len(changed) <= 1
        assert before - 1 >= before // 2 + 1 and after - 1 >= after // 2 + 1


def test_from_states_takes_the_leaders_list_and_maps_hosts_by_address() -> None:
    states = {
        "zk1": {
            "mode": "follower",
            "myid": "1",
            "has_data": True,
            "retired": [],
            "servers": [
                {"id": 1, "address": "10.0.0.1"},
                {"id": 2, "address": "10.0.0.2"},
                {"id": 3, "address": "10.0.0.3"},
                {"id": 4, "address": "10.0.0.4"},
            ],
        },
        "zk2": {
            "mode": "leader",
            "myid": "2",
            "has_data": True,
            "retired": [7],
            "servers": [
                {"id": 1, "address": "10.0.0.1"},
                {"id": 2, "address": "10.0.0.2"},
                {"id": 3, "address": "10.0.0.3"},
            ],
        },
        "zk3": {"mode": "follower", "myid": "3", "has_data": True, "retired": [], "servers": []},
        "zk4": {"mode": "follower", "myid": "4", "has_data": True, "retired": [], "servers": []},
    }
    group_ = {f"zk{i}": i for i in (1, 2, 3, 4)}
    current, modes_, target, retired = planner.from_states(
        {
            "group": group_,
            "addresses": {f"zk{i}": f"10.0.0.{i}" for i in (1, 2, 3, 4)},
            "states": states,
        }
    )
    assert [s.id for s in current] == [1, 2, 3] and current[1].host == "zk2"
    assert modes_ == {1: "follower", 2: "leader", 3: "follower"}
    assert retired == {7}
    assert target[3].serving and target[3].myid == 4
    # zk4 joined in an interrupted run: the add goes on
    assert steps(planner.plan(current, modes_, target, retired)) == [("add", 4, 4)]


def test_the_command_line_prints_a_refusal_as_json() -> None:
    state = {"group": {"zk1": 1}, "addresses": {"zk1": "10.0.0.1"}, "states": {}}
    out = subprocess.run(
        [sys.executable, str(ROOT / "playbooks" / "files" / "zookeeper_membership_plan.py")],
        input=json.dumps(state),
        capture_output=True,
        text=True,
        check=True,
    )
    assert "at least 3" in json.loads(out.stdout)["error"]


def test_the_state_probe_reads_a_members_directories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf, data, log = tmp_path / "conf", tmp_path / "data", tmp_path / "txlog"
    for d in (conf, data / "version-2", log / "version-2"):
        d.mkdir(parents=True)
    (conf / "zoo.cfg").write_text(
        "tickTime=2000\nserver.1=10.0.0.1:2888:3888\nserver.12=10.0.0.12:2888:3888\n"
    )
    (conf / "retired-ids").write_text("4\n5\n")
    (data / "myid").write_text("12\n")
    # a closed port: no srvr answer, no mode
    assert zookeeper_member_state.main(str(conf), str(data), str(log), "1") == 0
    state = json.loads(capsys.readouterr().out)
    assert state == {
        "mode": "",
        "myid": "12",
        "has_data": False,
        "retired": [4, 5],
        "servers": [{"id": 1, "address": "10.0.0.1"}, {"id": 12, "address": "10.0.0.12"}],
    }
    (log / "version-2" / "log.100000001").write_bytes(b"x")
    zookeeper_member_state.main(str(conf), str(data), str(log), "1")
    assert json.loads(capsys.readouterr().out)["has_data"] is True


def test_a_member_left_running_by_an_interrupted_removal_is_retired_first() -> None:
    states = {
        f"zk{i}": {
            "mode": "leader" if i == 1 else "follower",
            "myid": str(i),
            "has_data": True,
            "retired": [],
            "servers": [{"id": j, "address": f"10.0.0.{j}"} for j in (1, 2, 3)],
        }
        for i in (1, 2, 3)
    }
    states["zk4"] = {"mode": "", "myid": "4", "has_data": True, "retired": [], "servers": []}
    state = {
        "group": {f"zk{i}": i for i in (1, 2, 3)},
        "addresses": {f"zk{i}": f"10.0.0.{i}" for i in (1, 2, 3, 4)},
        "states": states,
    }
    args = planner.from_states(state)
    strays = planner.strays_of(state, args[0])
    assert strays == (server(4),)
    result = planner.plan(*args, strays=strays)
    assert steps(result) == [("retire", 4, 3)]
    assert result["steps"][0]["leave"] == "zk4" and result["retired"] == [4]
    # once retired (no myid), it is nothing to do
    states["zk4"]["myid"] = None
    assert planner.strays_of(state, args[0]) == ()
