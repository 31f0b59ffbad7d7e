// The transactions scenario of Moldau's reference lab (docs/compat.md): Kafka's own
// transactional producer (kafka-clients 3.9.1) commits and aborts transactions over two
// partitions, runs a consume-transform-produce step (sendOffsetsToTransaction), is fenced
// by a second producer with its transactional.id, and read_committed and
// read_uncommitted consumers print what each sees. Producer ids and epochs are a broker's
// counters: they stay out of the transcript.
//
//   java ... TxnTranscript BOOTSTRAP PREFIX main   the transactions above
//   java ... TxnTranscript BOOTSTRAP PREFIX hang   a committed record, then a transaction
//                                                  left open: the JVM halts mid-transaction
//   java ... TxnTranscript BOOTSTRAP PREFIX after  what read_committed sees of the hanging
//                                                  topic (after kafka-transactions.sh abort)
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnTranscript {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        switch (args[2]) {
            case "main" -> transactions(bootstrap, prefix);
            case "hang" -> hang(bootstrap, prefix);
            case "after" -> after(bootstrap, prefix);
            default -> throw new IllegalArgumentException("unknown mode " + args[2]);
        }
    }

    static void transactions(String bootstrap, String prefix) throws Exception {
        String in = prefix + "-in";
        String out = prefix + "-out";
        String group = prefix + "-ctp";
        createTopics(bootstrap, Map.of(in, 1, out, 2));
        List<TopicPartition> outs = List.of(new TopicPartition(out, 0), new TopicPartition(out, 1));

        try (KafkaProducer<String, String> producer = producer(bootstrap, prefix + "-a")) {
            producer.initTransactions();
            System.out.println("initTransactions: ok");
            producer.beginTransaction();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                sent.add(producer.send(new ProducerRecord<>(out, i % 2, "k" + i, "committed-" + i)));
            }
            producer.commitTransaction();
            printSent("committed", sent);
            producer.beginTransaction();
            sent.clear();
            for (int i = 0; i < 2; i++) {
                sent.add(producer.send(new ProducerRecord<>(out, i % 2, "k" + i, "aborted-" + i)));
            }
            producer.flush();
            producer.abortTransaction();
            printSent("aborted", sent);
        }

        // Input for the consume-transform-produce step: a plain idempotent producer.
        Properties plain = producerProps(bootstrap);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(plain)) {
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(in, 0, "k" + i, "input-" + i)).get();
            }
        }
        consumeTransformProduce(bootstrap, prefix + "-a", in, out, group);
        fencing(bootstrap, prefix + "-f", out);

        readAll(bootstrap, outs, IsolationLevel.READ_COMMITTED);
        readAll(bootstrap, outs, IsolationLevel.READ_UNCOMMITTED);
        try (Admin admin = admin(bootstrap)) {
            Map<String, String> committed = new TreeMap<>();
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                .forEach((tp, om) -> committed.put(tp.toString(), describe(om)));
            committed.forEach((tp, om) -> System.out.println("group committed " + tp + " " + om));
            listOffsets(admin, outs);
        }
    }

    static void consumeTransformProduce(String bootstrap, String txnId, String in, String out,
                                        String group) throws Exception {
        Properties props = consumerProps(bootstrap, IsolationLevel.READ_COMMITTED);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
             KafkaProducer<String, String> producer = producer(bootstrap, txnId)) {
            producer.initTransactions();
            consumer.subscribe(List.of(in));
            List<ConsumerRecord<String, String>> records = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (records.size() < 3 && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(200)).forEach(records::add);
            }
            System.out.println("ctp consumed " + records.size() + " of 3");
            producer.beginTransaction();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<String, String> r : records) {
                sent.add(producer.send(new ProducerRecord<>(out, 0, r.key(), r.value().toUpperCase())));
                offsets.put(new TopicPartition(r.topic(), r.partition()),
                            new OffsetAndMetadata(r.offset() + 1, "ctp"));
            }
            producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            producer.commitTransaction();
            printSent("ctp committed", sent);
        }
    }

    static void fencing(String bootstrap, String txnId, String out) throws Exception {
        KafkaProducer<String, String> first = producer(bootstrap, txnId);
        first.initTransactions();
        try (KafkaProducer<String, String> second = producer(bootstrap, txnId)) {
            second.initTransactions();
            System.out.println("fencing: second producer initTransactions ok");
            first.beginTransaction();
            Future<RecordMetadata> fenced = first.send(new ProducerRecord<>(out, 1, "f", "fenced"));
            try {
                first.commitTransaction();
                System.out.println("fencing: first commitTransaction ok");
            } catch (Exception e) {
                System.out.println("fencing: first commitTransaction threw " + e.getClass().getName());
            }
            try {
                fenced.get();
                System.out.println("fencing: first send ok");
            } catch (ExecutionException e) {
                System.out.println("fencing: first send failed " + e.getCause().getClass().getName());
            }
            second.beginTransaction();
            Future<RecordMetadata> kept = second.send(new ProducerRecord<>(out, 1, "f", "fencer"));
            second.commitTransaction();
            printSent("fencing: second committed", List.of(kept));
        } finally {
            first.close(Duration.ZERO);
        }
    }

    static void hang(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-hang";
        createTopics(bootstrap, Map.of(topic, 1));
        TopicPartition tp = new TopicPartition(topic, 0);
        KafkaProducer<String, String> producer = producer(bootstrap, prefix + "-h");
        producer.initTransactions();
        producer.beginTransaction();
        Future<RecordMetadata> before = producer.send(new ProducerRecord<>(topic, 0, "k", "before"));
        producer.commitTransaction();
        printSent("hang committed", List.of(before));
        producer.beginTransaction();
        List<Future<RecordMetadata>> open = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            open.add(producer.send(new ProducerRecord<>(topic, 0, "k", "open-" + i)));
        }
        producer.flush();
        printSent("hang open", open);
        System.out.println("start-offset " + open.get(0).get().offset());
        try (Admin admin = admin(bootstrap)) {
            listOffsets(admin, List.of(tp));
        }
        // Killed mid-transaction: no commit, no abort, no close.
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    static void after(String bootstrap, String prefix) throws Exception {
        TopicPartition tp = new TopicPartition(prefix + "-hang", 0);
        readAll(bootstrap, List.of(tp), IsolationLevel.READ_COMMITTED);
        try (Admin admin = admin(bootstrap)) {
            listOffsets(admin, List.of(tp));
        }
    }

    // Reads the partitions from the start until the position reaches the end offset the
    // consumer sees for its isolation level (the LSO for read_committed).
    static void readAll(String bootstrap, List<TopicPartition> partitions, IsolationLevel level) {
        String name = level.toString().toLowerCase();
        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(consumerProps(bootstrap, level))) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            List<ConsumerRecord<String, String>> records = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline
                   && partitions.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
                consumer.poll(Duration.ofMillis(200)).forEach(records::add);
            }
            records.sort(Comparator.comparing((ConsumerRecord<String, String> r) -> r.partition())
                         .thenComparingLong(ConsumerRecord::offset));
            for (ConsumerRecord<String, String> r : records) {
                System.out.println(name + " " + r.topic() + "-" + r.partition() + " offset="
                                   + r.offset() + " key=" + r.key() + " value=" + r.value());
            }
            for (TopicPartition tp : partitions) {
                System.out.println(name + " " + tp + " endOffset=" + ends.get(tp)
                                   + " position=" + consumer.position(tp));
            }
        }
    }

    static void listOffsets(Admin admin, List<TopicPartition> partitions) throws Exception {
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        partitions.forEach(tp -> latest.put(tp, OffsetSpec.latest()));
        for (IsolationLevel level : IsolationLevel.values()) {
            var result = admin.listOffsets(latest, new ListOffsetsOptions(level)).all().get();
            for (TopicPartition tp : partitions) {
                System.out.println("listOffsets latest " + level + " " + tp + " offset="
                                   + result.get(tp).offset());
            }
        }
    }

    static void createTopics(String bootstrap, Map<String, Integer> partitions) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            List<NewTopic> wanted = new ArrayList<>();
            new TreeMap<>(partitions).forEach((t, n) -> wanted.add(new NewTopic(t, n, (short) 1)));
            admin.createTopics(wanted).all().get();
            System.out.println("created " + new TreeMap<>(partitions));
        }
    }

    static void printSent(String label, List<Future<RecordMetadata>> sent) throws Exception {
        for (Future<RecordMetadata> future : sent) {
            RecordMetadata m = future.get();
            System.out.println(label + " " + m.topic() + "-" + m.partition() + " offset=" + m.offset());
        }
    }

    static String describe(OffsetAndMetadata om) {
        return om == null ? "none" : "offset=" + om.offset() + " metadata='" + om.metadata() + "'";
    }

    static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(props);
    }

    static Properties producerProps(String bootstrap) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return props;
    }

    static KafkaProducer<String, String> producer(String bootstrap, String transactionalId) {
        Properties props = producerProps(bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        return new KafkaProducer<>(props);
    }

    static Properties consumerProps(String bootstrap, IsolationLevel level) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, level.toString().toLowerCase());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return props;
    }
}
