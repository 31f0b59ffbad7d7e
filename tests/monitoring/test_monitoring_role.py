"""The monitoring role's configuration files, rendered by Ansible from the lab and the
production example inventories, pass Prometheus's own checks and scrape exactly the
exporters of the inventory. (The Molecule cluster scenario runs them on a real
monitoring host; this is the quick check of the templates.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = REPO / ".venv-deploy" / "bin" / "ansible-playbook"
FILES = ["prometheus.yml", "moldau.rules.yml", "alertmanager.yml", "prometheus.default",
         "alertmanager.default"]


def render(tmp_path: Path, inventory: str) -> Path:
    """Renders the role's templates for the inventory's first monitoring host into tmp_path,
    through a copy of the role with one extra task file (the role stays as it is)."""
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.fail(f"{ANSIBLE_PLAYBOOK} missing: run `make deploy-deps` first")
    role = tmp_path / "roles" / "monitoring"
    shutil.copytree(REPO / "roles" / "monitoring", role)
    out = tmp_path / "out"
    out.mkdir()
    task = {"ansible.builtin.template": {"src": "{{ item }}.j2", "dest": f"{out}/{{{{ item }}}}"},
            "loop": FILES}
    (role / "tasks" / "render.yml").write_text(yaml.safe_dump([task]), encoding="utf-8")
    play = {"hosts": "monitoring[0]", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_role": {"name": "monitoring", "tasks_from": "render.yml"}}]}
    playbook = tmp_path / "render.yml"
    playbook.write_text(yaml.safe_dump([play]), encoding="utf-8")
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(tmp_path / "roles"), ANSIBLE_NOCOLOR="1")
    python = ANSIBLE_PLAYBOOK.parent / "python"
    result = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(REPO / "inventories" / inventory),
         "-e", "ansible_connection=local", "-e", f"ansible_python_interpreter={python}",
         "-e", "ansible_become=false", str(playbook)],
        capture_output=True, text=True, env=env, timeout=300, check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {inv: render(tmp_path_factory.mktemp(inv), inv) for inv in ("lab", "production-example")}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("promtool is missing: `make deps` installs Debian's prometheus package")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=120, check=False)


def inventory_hosts(inventory: str) -> dict[str, dict[str, dict[str, object]]]:
    data = yaml.safe_load((REPO / "inventories" / inventory / "hosts.yml").read_text())
    return {group: body["hosts"] for group, body in data["all"]["children"].items()}


@pytest.mark.parametrize("inventory", ["lab", "production-example"])
def test_rendered_configs_pass_promtool_and_scrape_every_exporter(
        tmp_path: Path, rendered: dict[str, Path], inventory: str) -> None:
    out = rendered[inventory]
    rules = promtool("check", "rules", str(out / "moldau.rules.yml"))
    assert rules.returncode == 0, rules.stdout + rules.stderr
    config = yaml.safe_load((out / "prometheus.yml").read_text())
    # promtool resolves rule_files: point them at the rendered rules
    config["rule_files"] = [str(out / "moldau.rules.yml")]
    checked = tmp_path / "checked.yml"
    checked.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = promtool("check", "config", str(checked))
    assert result.returncode == 0, result.stdout + result.stderr

    groups = inventory_hosts(inventory)
    address = {name: str(v["moldau_host_address"]) for hosts in groups.values()
               for name, v in hosts.items()}
    first_broker = next(iter(groups["brokers"]))
    expected = {
        "kafka": {f"{address[h]}:9404" for h in groups["brokers"]},
        "kafka-lag": {f"{address[first_broker]}:9308"},
        "zookeeper": {f"{address[h]}:9141" for h in groups["zookeeper"]},
        "node": {f"{a}:9100" for a in address.values()},
        "prometheus": {f"{address[h]}:9090" for h in groups["monitoring"]},
        "alertmanager": {f"{address[h]}:9093" for h in groups["monitoring"]},
    }
    jobs = {job["job_name"]: {t for sc in job["static_configs"] for t in sc["targets"]}
            for job in config["scrape_configs"]}
    assert jobs == expected
    alertmanagers = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert alertmanagers == [f"{address[h]}:9093" for h in groups["monitoring"]]


def test_the_lab_shortens_the_under_replicated_alert_only(rendered: dict[str, Path]) -> None:
    out = rendered["lab"]
    rendered = yaml.safe_load((out / "moldau.rules.yml").read_text())
    packaged = yaml.safe_load(
        (REPO / "roles" / "monitoring" / "files" / "alerts" / "moldau.rules.yml").read_text())
    rules = {r["alert"]: r for g in rendered["groups"] for r in g["rules"]}
    assert rules["UnderReplicatedPartitions"]["for"] == "15s"
    rules["UnderReplicatedPartitions"]["for"] = "5m"
    assert rules == {r["alert"]: r for g in packaged["groups"] for r in g["rules"]}
    assert 'ARGS="--web.listen-address=172.31.0.31:9093 --cluster.listen-address="' in (
        out / "alertmanager.default").read_text()
