"""The lag exporter's client settings (`--client-config FILE`, `--client-property`): the
file's KEY=VALUE lines, what is refused and how (a clear message naming the file and the
line, never a value, and a non-zero exit before the exporter serves anything), and the
command line winning over the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from moldau_exporters.client_config import (
    ClientConfigError,
    client_config,
    parse_properties,
    read_properties,
)
from moldau_exporters.lag_exporter import main

SECRET = "s3cret-Value=with=equals"


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "lag-client.properties"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_key_value_lines_comments_and_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "# the exporter's login\n! a Java comment too\n\n"
                           "security.protocol=SASL_SSL\n  sasl.mechanism = SCRAM-SHA-512\n"
                           f"sasl.username=moldau-lag-exporter\nsasl.password={SECRET}\n")
    assert read_properties(path) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "moldau-lag-exporter", "sasl.password": SECRET}


def test_the_settings_reach_librdkafka_with_the_command_line_winning(tmp_path: Path) -> None:
    path = write(tmp_path, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                           f"sasl.username=u\nsasl.password={SECRET}\nclient.id=from-file\n")
    config = client_config("127.0.0.1:9094", path, ["client.id=from-command-line"])
    assert config == {"bootstrap.servers": "127.0.0.1:9094", "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": SECRET,
                      "client.id": "from-command-line"}


@pytest.mark.parametrize(("text", "message"), [
    (f"security.protocol=SASL_SSL\nsasl.password {SECRET}\n",
     "line 2: expected KEY=VALUE"),
    (f"={SECRET}\n", "line 1: expected KEY=VALUE"),
    (f"sasl.password={SECRET}\nsasl.password=other\n",
     "line 2: sasl.password given again (first on line 1)"),
    (f"sasl.password={SECRET}\\\n  more\n", "line 1 (sasl.password): ends with a backslash"),
])
def test_a_malformed_line_is_refused_without_showing_it(text: str, message: str) -> None:
    with pytest.raises(ClientConfigError) as refused:
        parse_properties(text, "lag.properties")
    assert f"lag.properties {message}" in str(refused.value)
    assert SECRET not in str(refused.value)


def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match=r"cannot read the client config .*missing: "
                                                r"No such file or directory"):
        read_properties(str(tmp_path / "missing"))
    # a directory: unreadable as a file for root too (the tests may run as root)
    with pytest.raises(ClientConfigError, match=r"cannot read .*: Is a directory"):
        read_properties(str(tmp_path))


def test_a_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "binary"
    path.write_bytes(b"sasl.password=\xff\xfe\n")
    with pytest.raises(ClientConfigError, match="is not UTF-8 text"):
        read_properties(str(path))


@pytest.mark.parametrize(("settings", "message"), [
    ({"sasl.jaas.config": "x"}, "sasl.jaas.config is a Java client property librdkafka does "
                                "not read; write sasl.username and sasl.password"),
    ({"ssl.truststore.location": "/etc/ca.p12"}, "write ssl.ca.location"),
    ({"no.such.property": "1"}, 'librdkafka refuses the client settings: No such '
                                'configuration property: "no.such.property"'),
    # confluent-kafka's wheel has no Kerberos: refused now, not at every scrape
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"},
     "No provider for SASL mechanism GSSAPI"),
])
def test_settings_librdkafka_cannot_use_are_refused_before_serving(
        tmp_path: Path, settings: dict[str, str], message: str) -> None:
    path = write(tmp_path, "".join(f"{k}={v}\n" for k, v in settings.items()))
    with pytest.raises(ClientConfigError) as refused:
        client_config("127.0.0.1:9094", path, [])
    assert message in str(refused.value)


def test_a_secret_on_the_command_line_is_refused() -> None:
    with pytest.raises(ClientConfigError,
                       match=r"--client-property sasl\.password: a secret on the command line"):
        client_config("127.0.0.1:9094", None, [f"sasl.password={SECRET}"])
    with pytest.raises(ClientConfigError, match="expected KEY=VALUE") as refused:
        client_config("127.0.0.1:9094", None, ["client.id"])
    assert "client.id" in str(refused.value)


def test_main_exits_with_the_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, f"sasl.password {SECRET}\n")
    with pytest.raises(SystemExit) as exited:
        main(["--bootstrap-server", "127.0.0.1:9094", "--client-config", path])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"{path} line 1: expected KEY=VALUE" in err and SECRET not in err
