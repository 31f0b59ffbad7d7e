// The authorization probe of Moldau's reference lab (docs/compat.md): Kafka's own client
// (kafka-clients 3.9.1) tries, as whatever principal its listener gives it (PLAINTEXT:
// User:ANONYMOUS), what a producer and a consumer of one topic and one group do, and
// prints one line per step: what the broker allowed, or the exception it answered with.
// The lab runs it before and after ACLs change and compares Kafka's answers with Moldau's.
//
//   java -cp <kafka jars>:<classes> AclProbe BOOTSTRAP TOPIC GROUP STEP...
//
// A BOOTSTRAP of the form USER:PASSWORD@HOST:PORT logs in as User:USER with SCRAM-SHA-256
// over SASL_PLAINTEXT (the ACL pair's SASL listener) instead; FILE.properties@HOST:PORT
// takes the client's security settings from that file (another SASL mechanism, or TLS
// with a client certificate).
//
// Steps: create (the topic, one partition, no retention limit), describe (the topic),
// produce (a plain producer), produce-idempotent, consume (the partition from its start
// to its end, no group), commit (the consumed position, in the group), describe-group,
// whoami (the principal the broker sees: the owner of a delegation token it creates),
// await-allowed and await-denied (until describing both the topic and the group is
// allowed, or refused: ACL changes written to ZooKeeper reach a broker a moment later).
import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class AclProbe {
    // A fixed CreateTime: both brokers store the same record.
    static final long TIMESTAMP = 1_700_000_000_000L;
    static final Duration AWAIT = Duration.ofSeconds(20);
    static final Duration CONSUME = Duration.ofSeconds(15);

    final String bootstrap;
    final String user;  // null: PLAINTEXT
    final String password;
    final Properties login = new Properties();  // from a FILE.properties bootstrap
    final String topic;
    final String group;
    final TopicPartition partition;
    long consumedTo;  // the position the consume step reached; commit commits it

    AclProbe(String bootstrap, String topic, String group) throws IOException {
        int at = bootstrap.lastIndexOf('@');
        if (at < 0) {
            this.bootstrap = bootstrap;
            this.user = null;
            this.password = null;
        } else if (bootstrap.substring(0, at).endsWith(".properties")) {
            try (Reader file = Files.newBufferedReader(Path.of(bootstrap.substring(0, at)))) {
                login.load(file);
            }
            this.bootstrap = bootstrap.substring(at + 1);
            this.user = null;
            this.password = null;
        } else {
            String login = bootstrap.substring(0, at);
            int colon = login.indexOf(':');
            this.bootstrap = bootstrap.substring(at + 1);
            this.user = login.substring(0, colon);
            this.password = login.substring(colon + 1);
        }
        this.topic = topic;
        this.group = group;
        this.partition = new TopicPartition(topic, 0);
    }

    public static void main(String[] args) throws Exception {
        AclProbe probe = new AclProbe(args[0], args[1], args[2]);
        for (int i = 3; i < args.length; i++) {
            String step = args[i];
            String outcome;
            try {
                outcome = probe.run(step);
            } catch (Exception e) {
                outcome = describe(e);
            }
            System.out.println(step + ": " + outcome);
        }
    }

    /** An exception as the line shows it: the cause of a future's failure, by class. */
    static String describe(Throwable e) {
        Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return cause.getClass().getName() + ": " + cause.getMessage();
    }

    String run(String step) throws Exception {
        switch (step) {
            case "create": return create();
            case "describe": return describeTopic();
            case "produce": return produce(false);
            case "produce-idempotent": return produce(true);
            case "consume": return consume();
            case "commit": return commit();
            case "describe-group": return describeGroup();
            case "whoami": return whoami();
            case "await-allowed": return await(true);
            case "await-denied": return await(false);
            default: throw new IllegalArgumentException("no step " + step);
        }
    }

    Properties common() {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "acl-probe");
        props.putAll(login);
        if (user != null) {
            props.put(AdminClientConfig.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
            props.put(SaslConfigs.SASL_MECHANISM, "SCRAM-SHA-256");
            props.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security.scram."
                + "ScramLoginModule required username=\"" + user + "\" password=\"" + password
                + "\";");
        }
        return props;
    }

    String create() throws Exception {
        try (Admin admin = Admin.create(common())) {
            // kept for ever: records this old would go at a broker's first retention
            // check (30 s after it starts), which the two brokers do not reach together
            NewTopic created = new NewTopic(topic, 1, (short) 1)
                .configs(Map.of("retention.ms", "-1"));
            admin.createTopics(List.of(created)).all().get();
            return "ok";
        }
    }

    String describeTopic() throws Exception {
        try (Admin admin = Admin.create(common())) {
            TopicDescription description = admin.describeTopics(List.of(topic))
                .allTopicNames().get().get(topic);
            return description.partitions().size() + " partition(s), leader "
                + description.partitions().get(0).leader().id();
        }
    }

    String produce(boolean idempotent) throws Exception {
        Properties props = common();
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(idempotent));
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "15000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        String value = idempotent ? "idempotent" : "plain";
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            RecordMetadata sent = producer.send(
                new ProducerRecord<>(topic, 0, TIMESTAMP, "probe", value)).get();
            return "offset " + sent.offset();
        }
    }

    Properties consumerProps() {
        Properties props = common();
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        return props;
    }

    String consume() {
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(
                 consumerProps(), new StringDeserializer(), new StringDeserializer())) {
            consumer.assign(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            consumer.seekToBeginning(List.of(partition));
            List<String> seen = new ArrayList<>();
            long deadline = System.nanoTime() + CONSUME.toNanos();
            while (consumer.position(partition) < end && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
                    seen.add(record.offset() + " " + record.key() + "=" + record.value()
                             + " @" + record.timestamp());
                }
            }
            consumedTo = consumer.position(partition);
            return seen.size() + " record(s) of " + end + " " + seen;
        }
    }

    String commit() {
        Properties props = consumerProps();
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(
                 props, new StringDeserializer(), new StringDeserializer())) {
            consumer.assign(List.of(partition));
            consumer.commitSync(Map.of(partition, new OffsetAndMetadata(consumedTo)));
            OffsetAndMetadata committed = consumer.committed(Set.of(partition)).get(partition);
            return "committed " + (committed == null ? "nothing" : committed.offset());
        }
    }

    String describeGroup() throws Exception {
        try (Admin admin = Admin.create(common())) {
            ConsumerGroupDescription description = admin.describeConsumerGroups(List.of(group))
                .describedGroups().get(group).get();
            return "state " + description.state() + ", " + description.members().size()
                + " member(s)";
        }
    }

    /** The principal the broker gave this login: the owner of a delegation token it
     *  creates for itself (any authenticated login may, with no ACL). */
    String whoami() throws Exception {
        try (Admin admin = Admin.create(common())) {
            return "owner " + admin.createDelegationToken().delegationToken().get()
                .tokenInfo().owner();
        }
    }

    /** Until describing the topic and the group is allowed (or refused) on every try. */
    String await(boolean allowed) throws Exception {
        long deadline = System.nanoTime() + AWAIT.toNanos();
        String last = "";
        try (Admin admin = Admin.create(common())) {
            while (System.nanoTime() < deadline) {
                String topicAnswer = attempt(() -> admin.describeTopics(List.of(topic)).allTopicNames().get());
                String groupAnswer = attempt(() -> admin.describeConsumerGroups(List.of(group)).all().get());
                last = "topic " + topicAnswer + ", group " + groupAnswer;
                boolean both = allowed ? topicAnswer.equals("allowed") && groupAnswer.equals("allowed")
                                       : topicAnswer.equals("denied") && groupAnswer.equals("denied");
                if (both) {
                    return last;
                }
                Thread.sleep(100);
            }
        }
        return "timed out after " + AWAIT.toSeconds() + " s: " + last;
    }

    interface Call {
        void run() throws Exception;
    }

    static String attempt(Call call) {
        try {
            call.run();
            return "allowed";
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            return cause instanceof AuthorizationException ? "denied" : describe(e);
        }
    }
}
