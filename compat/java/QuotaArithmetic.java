import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetAddress;
import java.util.Collections;
import java.util.Map;
import java.util.function.Supplier;

import kafka.server.ClientQuotaManager;
import kafka.server.QuotaType;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Quota;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.network.Session;
import org.apache.kafka.server.config.ClientQuotaManagerConfig;

/**
 * Kafka's own ClientQuotaManager (the broker's produce and fetch byte-rate quotas) driven
 * by a script on standard input, on a clock the script sets, so that Moldau's arithmetic
 * (broker/src/moldau/server/rate_sensors.py, quota_managers.py) can be compared with it:
 *
 *   QuotaArithmetic SAMPLES WINDOW_SECONDS BOUND   (a quota of BOUND for client id "c")
 *   r MS VALUE   record VALUE at MS (recordAndGetThrottleTimeMs): prints the throttle ms
 *   u MS VALUE   take VALUE back out at MS (a throttled fetch's unrecordQuotaSensor)
 *   m MS         prints the byte-rate metric as JMX reads it at MS
 */
public class QuotaArithmetic {
    private static long now = 0;

    public static void main(String[] args) throws Exception {
        int samples = Integer.parseInt(args[0]);
        int windowSeconds = Integer.parseInt(args[1]);
        double bound = Double.parseDouble(args[2]);
        Time time = new Time() {
            public long milliseconds() { return now; }
            public long nanoseconds() { return now * 1_000_000L; }
            public void sleep(long ms) { now += ms; }
            public void waitObject(Object obj, Supplier<Boolean> condition, long deadlineMs) { }
        };
        Metrics metrics = new Metrics(new MetricConfig(), Collections.emptyList(), time);
        ClientQuotaManager quotas = new ClientQuotaManager(
            new ClientQuotaManagerConfig(samples, windowSeconds), metrics,
            QuotaType.Produce$.MODULE$, time, "", scala.Option.empty());
        quotas.updateQuota(scala.Option.empty(), scala.Option.apply("c"), scala.Option.apply("c"),
                           scala.Option.apply(Quota.upperBound(bound)));
        Session session = new Session(KafkaPrincipal.ANONYMOUS, InetAddress.getLoopbackAddress());
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out), false);
        String line;
        while ((line = in.readLine()) != null) {
            String[] op = line.trim().split(" ");
            if (op.length < 2)
                continue;
            now = Long.parseLong(op[1]);
            switch (op[0]) {
                case "r":
                    out.println(quotas.recordAndGetThrottleTimeMs(session, "c",
                                                                 Double.parseDouble(op[2]), now));
                    break;
                case "u":
                    quotas.getOrCreateQuotaSensors(session, "c").quotaSensor()
                          .record(-Double.parseDouble(op[2]), now, false);
                    break;
                case "m":
                    out.println(byteRate(metrics));
                    break;
                default:
                    throw new IllegalArgumentException("unknown operation: " + line);
            }
        }
        out.flush();
        quotas.shutdown();
        System.exit(0);
    }

    private static String byteRate(Metrics metrics) {
        for (Map.Entry<MetricName, KafkaMetric> entry : metrics.metrics().entrySet()) {
            MetricName name = entry.getKey();
            if (name.name().equals("byte-rate") && "c".equals(name.tags().get("client-id")))
                return entry.getValue().metricValue().toString();
        }
        return "NaN";
    }
}
