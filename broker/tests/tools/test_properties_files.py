"""The tools' properties files (unit, no processes): Kafka's rules and ISO-8859-1, one-line
ToolErrors."""

from pathlib import Path

import pytest

from moldau.tools.options import ToolError
from moldau.tools.properties import load_properties
from moldau.tools.server_scripts import _node_id


def test_load_properties_reads_iso_8859_1_with_javas_rules(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_bytes(b"sasl.username=jos\xe9\nssl.keystore.location=C:\\\\ks\\\\a.p12\n"
                     b"list = a,\\\n   b\n")
    assert load_properties(str(path)) == {
        "sasl.username": "jos\u00e9", "ssl.keystore.location": "C:\\ks\\a.p12", "list": "a,b"}


def test_unreadable_or_malformed_files_are_tool_errors(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"^/nonexistent/x.properties \(No such file"):
        load_properties("/nonexistent/x.properties")
    path = tmp_path / "bad.properties"
    path.write_text("a=1\nb=\\u00g0\n")
    with pytest.raises(ToolError, match=r"bad.properties: Malformed \\uxxxx encoding in line 2"):
        load_properties(str(path))


def test_stop_finds_the_broker_id_as_kafka_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("# broker.id=9\nbroker.id = 3 \nnode.id\\\n  =4\n")
    assert _node_id(str(path)) == "3"
    path.write_text("node.id:\\u0034\n")
    assert _node_id(str(path)) == "4"
    path.write_text("broker.id=\\u00zz\n")
    assert _node_id(str(path)) is None
    assert _node_id(str(tmp_path / "missing")) is None
    assert _node_id(None) is None
