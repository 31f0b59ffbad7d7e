"""compat/quotas.py's own arithmetic, without brokers: reading JmxTool's output, and the
figures a round reports (`make compat-quotas` runs the brokers)."""

from __future__ import annotations

import math

from compat import quotas

# what Kafka 3.9.1's JmxTool printed against the lab's broker (two --object-name MBeans,
# every attribute; the first line goes to standard output too)
JMX_TOOL_OUTPUT = """\
Trying to connect to JMX url: service:jmx:rmi:///jndi/rmi://127.0.0.1:38933/jmxrmi
"time","kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t:Count","kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t:OneMinuteRate","kafka.server:type=Produce,client-id=clueful:byte-rate","kafka.server:type=Produce,client-id=clueful:throttle-time"
1796612567359,457244672,505466.6746438359,1.109063790704147E7,328.8125
1796612568361,457244672,505466.6746438359,1.1093725501113586E7,NaN
"""


def test_jmx_tool_lines_become_readings() -> None:
    readings = quotas.parse_jmx_tool(JMX_TOOL_OUTPUT.splitlines())
    assert [r.at for r in readings] == [1796612567.359, 1796612568.361]
    first = readings[0].values
    assert first["kafka.server:type=Produce,client-id=clueful:byte-rate"] == 11090637.90704147
    assert first["kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t:"
                 "OneMinuteRate"] == 505466.6746438359
    assert math.isnan(readings[1].values[
        "kafka.server:type=Produce,client-id=clueful:throttle-time"])


def test_a_round_is_reported_as_multiples_of_the_quota() -> None:
    meter = quotas.Meter(start=0.0)
    meter.by_second = {0: 10_000_000, 5: 1, **{s: 1_100_000 for s in range(11, 41)}}
    sensor = [(10.5, 5e6), (11.0, 1.2e6), (20.0, 1.0e6), (41.0, 9e6)]  # 11 s to 41 s only
    one_minute = [(5.0, 2e5), (40.0, 5.5e5), (42.0, 9e6)]  # the run's readings, to 41 s
    phase = quotas.summarize("kafka", 1, quotas.PRODUCE, meter, sensor, one_minute, 4.0)
    assert math.isclose(phase.client, 1.1)
    assert math.isclose(phase.sensor_max, 1.2)
    assert math.isclose(phase.sensor_mean, 1.1)
    assert math.isclose(phase.one_minute_max, 0.55)
    table = quotas.table([phase])
    assert "kafka   produce   client rate          1.100  1.100" in table
