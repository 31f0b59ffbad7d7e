"""What one client certificate may do on each broker by itself, after enable-authorizer.yml:
a Metadata request for TOPIC over SSL, sent to each broker in turn (not to the cluster,
so every broker's own authorizer answers).

  acl_check.py CODE TOPIC CA CERT KEY HOST:PORT [HOST:PORT ...]

CODE is the topic error each broker must answer: 0 (allowed) or 29
(TOPIC_AUTHORIZATION_FAILED). Exit 0 when all do, 1 naming those that did not. Moldau's
client code comes from broker/src (PYTHONPATH), as for ops_probe.py."""

from __future__ import annotations

import ssl
import sys

from moldau.client.blocking import BlockingConnection
from moldau.protocol.generated.metadata_request import MetadataRequest


def topic_error(address: str, topic: str, context: ssl.SSLContext) -> int:
    host, port = address.rsplit(":", 1)
    with BlockingConnection(host, int(port), ssl_context=context) as conn:
        answer = conn.request_by_name("Metadata", 1,
                                      topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
    return int(answer.topics[0].error_code)


def main(argv: list[str]) -> int:
    expected, topic, ca, cert, key, *brokers = argv
    context = ssl.create_default_context(cafile=ca)
    context.check_hostname = False  # the CA is what counts here, not the address's name
    context.load_cert_chain(cert, key)
    answers = {address: topic_error(address, topic, context) for address in brokers}
    wrong = {a: code for a, code in answers.items() if code != int(expected)}
    print(f"topic {topic}: " + ", ".join(f"{a} error {c}" for a, c in answers.items()))
    if wrong:
        print(f"expected error {expected} from every broker; these differ: {wrong}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
