"""Two brokers whose inter-broker listener is SASL_PLAINTEXT with GSSAPI against a real MIT
KDC (tests/kdc.py): each broker logs in from its own keytab as `kafka/localhost@REALM`
(the two share the host, so the principal; the second keytab holds the same keys), and the
controller's requests and the replica fetchers authenticate with the brokers' own tickets
towards `kafka/localhost`. The principal the brokers see of each other is `User:kafka`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from moldau.devcluster.brokers import BrokerProcess

from .gssapi_pair import gssapi_pair
from .inter_broker_check import assert_two_brokers_replicate


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory,
            zk_ensemble) -> Iterator[tuple[list[BrokerProcess], str]]:
    with gssapi_pair(tmp_path_factory, zk_ensemble, "gssapi-ib") as started:
        yield started


def test_replication_and_controller_requests_over_gssapi(cluster) -> None:
    brokers, bootstrap = cluster
    assert_two_brokers_replicate(brokers, bootstrap, "gssapi-rf2")
