"""KafkaZkClient's operations on the cluster and its brokers: the persistent paths every
broker expects, the cluster id, broker ids and registrations, and producer id blocks.

Each function is a method of KafkaZkClient, which binds it in its class body (zk_client.py);
it takes the ZkSession it runs on and uses its generic operations (zk_session.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kazoo.exceptions import BadVersionError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_data import BrokerRegistration, ProducerIdBlock
from moldau.cluster.zk_errors import UNAVAILABLE, ZkError

if TYPE_CHECKING:
    from moldau.cluster.zk_session import ZkSession

# Kafka's reserved.broker.max.id default: generated broker ids start above it.
DEFAULT_RESERVED_BROKER_MAX_ID = 1000


def ensure_persistent_paths(self: ZkSession) -> None:
    """createTopLevelPaths: the persistent znodes every broker expects."""
    zk = self._client()
    if self.secure_acls:  # /config first, or a sensitive child's ACL would be its parent's
        self.ensure_path(zd.CONFIG_PATH)
    for window in self._windows(zd.PERSISTENT_PATHS):
        pending = [(p, zk.ensure_path_async(p, self._acl(p))) for p in window]
        for path, result in pending:
            try:
                result.get(timeout=self.session_timeout_ms / 1000)
            except UNAVAILABLE:
                self.ensure_path(path)


def get_cluster_id(self: ZkSession) -> str | None:
    found = self.get(zd.CLUSTER_ID_PATH)
    return zd.decode_cluster_id(found[0]) if found else None


def get_or_create_cluster_id(self: ZkSession) -> str:
    """The cluster id of /cluster/id, created with a new random id by the first broker."""
    while True:
        existing = get_cluster_id(self)
        if existing is not None:
            return existing
        proposed = zd.generate_cluster_id()
        if self._create_if_missing(zd.CLUSTER_ID_PATH, zd.encode_cluster_id(proposed)):
            return proposed


def generate_broker_id(
    self: ZkSession, reserved_broker_max_id: int = DEFAULT_RESERVED_BROKER_MAX_ID
) -> int:
    """broker.id.generation: bump /brokers/seqid's version; id = version + reserved max."""
    zk = self._client()
    while True:
        try:
            stat = self._call(zk.set, zd.BROKER_SEQID_PATH, b"", -1)
            return stat.version + reserved_broker_max_id
        except NoNodeError:
            self._create_if_missing(zd.BROKER_SEQID_PATH)


def get_broker_ids(self: ZkSession) -> list[int]:
    return sorted(int(c) for c in self.get_children(zd.BROKER_IDS_PATH) if c.isdigit())


def get_broker(self: ZkSession, broker_id: int) -> BrokerRegistration | None:
    found = self.get(zd.broker_path(broker_id))
    return _registration(broker_id, found) if found else None


def get_all_brokers(self: ZkSession) -> list[BrokerRegistration]:
    ids = get_broker_ids(self)
    found = self._get_many([zd.broker_path(i) for i in ids])
    return [_registration(i, f) for i, f in zip(ids, found, strict=True) if f]


def allocate_producer_id_block(self: ZkSession, broker_id: int) -> tuple[int, int]:
    """ZkProducerIdManager.getNewProducerIdBlock: take the next 1000 producer ids with a
    conditional write on /latest_producer_id_block. Returns (first, last) inclusive."""
    zk = self._client()
    while True:
        found = self.get(zd.PRODUCER_ID_BLOCK_PATH)
        if found is None:
            block = ProducerIdBlock(broker_id, 0)
            if self._create_if_missing(zd.PRODUCER_ID_BLOCK_PATH, block.encode()):
                return block.first, block.last
            continue
        data, stat = found
        if data:
            current = ProducerIdBlock.decode(data)
            if current.last > zd.LONG_MAX - zd.PRODUCER_ID_BLOCK_SIZE:
                raise ZkError("Have exhausted all producerIds.")
            block = ProducerIdBlock(broker_id, current.next_block_first)
        else:
            block = ProducerIdBlock(broker_id, 0)
        try:
            self._call(zk.set, zd.PRODUCER_ID_BLOCK_PATH, block.encode(), stat.version)
            return block.first, block.last
        except BadVersionError:
            continue  # another broker took a block: read again


def _registration(broker_id: int, found: tuple[bytes, ZnodeStat]) -> BrokerRegistration:
    """A registration with its broker epoch: the czxid of the ephemeral znode."""
    registration = BrokerRegistration.decode(broker_id, found[0])
    registration.epoch = found[1].czxid
    return registration
