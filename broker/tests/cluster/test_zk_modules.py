"""The ZooKeeper client and layout are split by subject, and put back together where callers
look for them: every operation of the zk_*_ops modules is a method of KafkaZkClient, and
zk_data offers every name of the layout's modules."""

import ast
import inspect
from pathlib import Path
from types import ModuleType

import pytest

from moldau.cluster import (
    zk_broker_ops,
    zk_broker_znode,
    zk_cluster_znodes,
    zk_config_ops,
    zk_config_znodes,
    zk_controller_ops,
    zk_controller_znodes,
    zk_data,
    zk_paths,
    zk_topic_ops,
    zk_topic_znodes,
)
from moldau.cluster.zk_client import KafkaZkClient

OPERATION_MODULES = [zk_broker_ops, zk_config_ops, zk_controller_ops, zk_topic_ops]
LAYOUT_MODULES = [zk_paths, zk_cluster_znodes, zk_broker_znode, zk_topic_znodes,
                  zk_config_znodes, zk_controller_znodes]


def defined_names(module: ModuleType) -> set[str]:
    """The public names a module defines itself (not those it imports)."""
    tree = ast.parse(Path(inspect.getfile(module)).read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


@pytest.mark.parametrize("module", OPERATION_MODULES, ids=lambda m: m.__name__)
def test_every_operation_is_a_method_of_the_client(module: ModuleType) -> None:
    operations = {name for name in defined_names(module)
                  if inspect.isfunction(getattr(module, name))}
    assert operations
    client = KafkaZkClient("127.0.0.1:1")  # not started: no connection is made
    for name in operations:
        assert getattr(KafkaZkClient, name) is getattr(module, name), name
        assert getattr(client, name).__self__ is client, name


@pytest.mark.parametrize("module", LAYOUT_MODULES, ids=lambda m: m.__name__)
def test_zk_data_offers_every_name_of_the_layout(module: ModuleType) -> None:
    names = defined_names(module)
    assert names
    for name in names:
        assert name in zk_data.__all__, name
        assert getattr(zk_data, name) is getattr(module, name), name
