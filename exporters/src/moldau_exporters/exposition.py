"""The exporters' samples as prometheus-client metric families, served on /metrics.

Each exporter computes its samples when scraped (the broker's MBeans through the rules,
the cluster's offsets, a ZooKeeper node's `mntr`); a collector hands them to
prometheus-client as metric families, and the client's writer produces the text.

Two choices keep the names dashboards query:

- A COUNTER whose name does not end in `_total` (a histogram's `..._count`, ZooKeeper's
  `zookeeper_packetsreceived`) keeps its name and is written as untyped: prometheus-client
  names a counter's sample `<family>_total`, as OpenMetrics and the JMX exporter 1.x do,
  which would rename the series the JMX exporter 0.x's Kafka names stand for.
- /metrics always answers in the text format 0.0.4, whatever the Accept header offers,
  as the JMX exporter 0.x does: OpenMetrics asks exposers to keep the suffixes `_total`
  and `_count` and the label `quantile` for counters and summaries, and the JMX
  exporter's names put them on gauges (`..._connection_creation_total`,
  `..._totaltimems{quantile="0.99"}`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    UnknownMetricFamily,
)

from .jmx_rules import Sample

TOTAL = "_total"


def _family(sample: Sample) -> Metric:
    """The metric family a name's first sample decides (type and help), as the JMX
    exporter does when rules disagree."""
    if sample.type == "GAUGE":
        return GaugeMetricFamily(sample.name, sample.help)
    if sample.type == "COUNTER" and sample.name.endswith(TOTAL) and sample.name != TOTAL:
        return CounterMetricFamily(sample.name, sample.help)  # the family drops _total
    return UnknownMetricFamily(sample.name, sample.help)


def families(samples: Iterable[Sample]) -> list[Metric]:
    """One family per sample name, in name order, each sample under its own name."""
    by_name: dict[str, Metric] = {}
    for sample in samples:
        family = by_name.get(sample.name)
        if family is None:
            family = by_name[sample.name] = _family(sample)
        # add_sample, not add_metric: the samples of one name may carry different label
        # sets (a quota bean has a user, a client id or both)
        family.add_sample(sample.name, dict(sample.labels), sample.value)
    return [by_name[name] for name in sorted(by_name)]


class SampleCollector:
    """A prometheus-client collector over a function that computes the samples."""

    def __init__(self, collect: Callable[[], list[Sample]]) -> None:
        self._collect = collect

    def collect(self) -> Iterator[Metric]:
        yield from families(self._collect())


def exposition(samples: list[Sample]) -> str:
    """The Prometheus text format (0.0.4) of the samples."""
    return generate_latest(SampleCollector(lambda: samples)).decode()


def serve(collect: Callable[[], list[Sample]], host: str, port: int) -> ThreadingHTTPServer:
    """An HTTP server answering /metrics with the samples of collect() at each scrape."""
    collector = SampleCollector(collect)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404, "use /metrics")
                return
            body = generate_latest(collector)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:  # scrapes are not news
            pass

    return ThreadingHTTPServer((host, port), Handler)


def run(collect: Callable[[], list[Sample]], listen: str) -> int:
    """Serve collect()'s samples on /metrics at listen (host:port) until interrupted."""
    host, _, port = listen.rpartition(":")
    server = serve(collect, host or "127.0.0.1", int(port))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
