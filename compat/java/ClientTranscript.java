// The Java client scenario of Moldau's reference lab (docs/compat.md): Kafka's own client
// (kafka-clients 3.9.1) creates a topic per codec with the AdminClient, produces records
// with keys, headers and explicit timestamps through an idempotent acks=all producer per
// codec, consumes them back in a group, commits, and prints one line per observation.
// The lab runs it against Apache Kafka and against Moldau and compares the two
// transcripts, so every line holds only what a broker decides (offsets, timestamps,
// leader epochs, errors), never a wall-clock time or a generated id.
//
//   java -cp <kafka jars>:<classes> ClientTranscript BOOTSTRAP TOPIC_PREFIX GROUP
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class ClientTranscript {
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final int RECORDS_PER_CODEC = 5;
    // A fixed CreateTime, so both brokers store and return the same timestamps.
    static final long BASE_TIMESTAMP = 1_700_000_000_000L;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        String group = args[2];
        List<String> topics = new ArrayList<>();
        for (String codec : CODECS) {
            topics.add(prefix + "-" + codec);
        }
        createTopics(bootstrap, topics);
        for (String codec : CODECS) {
            produce(bootstrap, prefix + "-" + codec, codec);
        }
        consume(bootstrap, topics, group, CODECS.length * RECORDS_PER_CODEC);
    }

    static void createTopics(String bootstrap, List<String> topics) throws InterruptedException {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            // The records' fixed timestamps are years old: without retention.ms=-1 a
            // broker's first retention check (Kafka's comes 30 s after start) deletes
            // them before the dump-log scenarios read the segments.
            List<NewTopic> wanted = topics.stream()
                .map(t -> new NewTopic(t, 1, (short) 1).configs(Map.of("retention.ms", "-1")))
                .collect(Collectors.toList());
            var results = admin.createTopics(wanted).values();
            for (String topic : topics) {
                try {
                    results.get(topic).get();
                    System.out.println("create " + topic + ": ok");
                } catch (ExecutionException e) {
                    System.out.println("create " + topic + ": " + e.getCause().getClass().getSimpleName());
                }
            }
        }
    }

    static void produce(String bootstrap, String topic, String codec) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        // One batch per codec: the records wait for the flush, not for a timer.
        props.put(ProducerConfig.LINGER_MS_CONFIG, "60000");
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "compat-producer-" + codec);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < RECORDS_PER_CODEC; i++) {
                RecordHeaders headers = new RecordHeaders();
                headers.add("trace", ("t-" + i).getBytes(StandardCharsets.UTF_8));
                headers.add("codec", codec.getBytes(StandardCharsets.UTF_8));
                if (i == 2) {
                    headers.add("empty", null);  // a header without a value
                }
                String key = i == 3 ? null : "key-" + i;  // one record without a key
                String value = i == 4 ? null : ("value " + i + " ").repeat(20);  // a tombstone
                sent.add(producer.send(new ProducerRecord<>(topic, 0, BASE_TIMESTAMP + i * 1000L,
                                                            key, value, headers)));
            }
            producer.flush();
            for (Future<RecordMetadata> future : sent) {
                RecordMetadata m = future.get();
                System.out.println("produced " + m.topic() + "-" + m.partition() + " offset="
                                   + m.offset() + " timestamp=" + m.timestamp()
                                   + " keySize=" + m.serializedKeySize()
                                   + " valueSize=" + m.serializedValueSize());
            }
        }
    }

    static void consume(String bootstrap, List<String> topics, String group, int expected) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "compat-consumer");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<ConsumerRecord<String, String>> records = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(topics);
            long deadline = System.currentTimeMillis() + 60_000;
            while (records.size() < expected && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(200)).forEach(records::add);
            }
            records.sort(Comparator.comparing((ConsumerRecord<String, String> r) -> r.topic())
                         .thenComparingLong(ConsumerRecord::offset));
            for (ConsumerRecord<String, String> r : records) {
                System.out.println("consumed " + r.topic() + "-" + r.partition()
                                   + " offset=" + r.offset() + " " + r.timestampType()
                                   + "=" + r.timestamp() + " leaderEpoch=" + r.leaderEpoch()
                                   + " key=" + r.key() + " value=" + shorten(r.value())
                                   + " headers=" + headers(r.headers()));
            }
            System.out.println("consumed " + records.size() + " of " + expected);
            List<TopicPartition> assigned = new ArrayList<>(consumer.assignment());
            assigned.sort(Comparator.comparing(TopicPartition::toString));
            System.out.println("assignment " + assigned);
            for (TopicPartition tp : assigned) {
                System.out.println("position " + tp + " " + consumer.position(tp));
            }
            consumer.commitSync();
            Map<String, String> committed = new TreeMap<>();
            consumer.committed(consumer.assignment()).forEach((tp, om) ->
                committed.put(tp.toString(), describe(om)));
            committed.forEach((tp, om) -> System.out.println("committed " + tp + " " + om));
        }
    }

    static String describe(OffsetAndMetadata om) {
        if (om == null) {
            return "none";
        }
        return "offset=" + om.offset() + " leaderEpoch=" + om.leaderEpoch()
            + " metadata='" + om.metadata() + "'";
    }

    static String shorten(String value) {
        return value == null ? "null" : value.substring(0, Math.min(value.length(), 16)) + "...("
            + value.length() + ")";
    }

    static String headers(Iterable<Header> headers) {
        List<String> out = new ArrayList<>();
        for (Header h : headers) {
            out.add(h.key() + "=" + (h.value() == null ? "null"
                                     : new String(h.value(), StandardCharsets.UTF_8)));
        }
        return out.toString();
    }
}
