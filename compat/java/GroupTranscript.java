// The consumer-group scenario of Moldau's reference lab (docs/compat.md): kafka-clients
// 3.9.1 consumers in groups with the range, cooperative-sticky and static-membership
// (group.instance.id) setups, members joining and leaving, then one consumer with
// assigned partitions that seeks, pauses, resumes, looks offsets up by time and commits.
//
// Each group step waits for a condition (the assignments it expects), never for a fixed
// time, and prints what the members saw: the rebalance callbacks each member got, with
// the generation, and the assignments once the group is settled. Members are driven from
// one thread, in turn, with short polls, so a member that must rejoin gets to.
//
//   java -cp <kafka jars>:<classes> GroupTranscript BOOTSTRAP PREFIX
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class GroupTranscript {
    static final long BASE_TIMESTAMP = 1_700_000_000_000L;
    static final int RECORDS_PER_PARTITION = 4;
    static final long STEP_TIMEOUT_MS = 60_000;

    final String bootstrap;
    final String topicA;  // 3 partitions
    final String topicB;  // 2 partitions
    final List<TopicPartition> all = new ArrayList<>();

    GroupTranscript(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.topicA = prefix + "-a";
        this.topicB = prefix + "-b";
        for (int p = 0; p < 3; p++) {
            all.add(new TopicPartition(topicA, p));
        }
        for (int p = 0; p < 2; p++) {
            all.add(new TopicPartition(topicB, p));
        }
    }

    public static void main(String[] args) throws Exception {
        GroupTranscript t = new GroupTranscript(args[0], args[1]);
        String prefix = args[1];
        t.setUp();
        t.joinAndLeave("range", prefix + "-range", RangeAssignor.class.getName());
        t.joinAndLeave("cooperative", prefix + "-coop", CooperativeStickyAssignor.class.getName());
        t.staticMembers(prefix + "-static");
        t.positions(prefix + "-seek");
    }

    // One member of a group: its consumer and the callbacks it got since the last print.
    final class Member {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final List<String> events = new ArrayList<>();

        Member(String name, String group, String assignor, String instanceId) {
            this.name = name;
            Properties props = consumerProps(group, name);
            props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
            if (instanceId != null) {
                props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
            }
            consumer = new KafkaConsumer<>(props);
            consumer.subscribe(List.of(topicA, topicB), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    events.add("revoked " + sorted(partitions));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    // A cooperative member gets an empty call for each generation it syncs
                    // in; whether a follower syncs in the short generation between a
                    // revocation and the leader's rejoin is a race (on Kafka too), so the
                    // empty calls stay out: the settled generation says the same.
                    if (partitions.isEmpty()) {
                        return;
                    }
                    events.add("assigned generation=" + consumer.groupMetadata().generationId()
                               + " " + sorted(partitions));
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    events.add("lost " + sorted(partitions));
                }
            });
        }

        void poll() {
            consumer.poll(Duration.ofMillis(50));
        }

        void print() {
            for (String event : events) {
                System.out.println("  " + name + " " + event);
            }
            events.clear();
            System.out.println("  " + name + " generation="
                               + consumer.groupMetadata().generationId()
                               + " assignment=" + sorted(consumer.assignment()));
        }

        void close() {
            consumer.close();
            for (String event : events) {
                System.out.println("  " + name + " " + event + " (closing)");
            }
            events.clear();
        }
    }

    Properties consumerProps(String group, String clientId) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        // A member learns of a rebalance at its next heartbeat: keep that short.
        props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "100");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return props;
    }

    void setUp() throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            admin.createTopics(List.of(
                new NewTopic(topicA, 3, (short) 1).configs(Map.of("retention.ms", "-1")),
                new NewTopic(topicB, 2, (short) 1).configs(Map.of("retention.ms", "-1"))))
                .all().get();
        }
        Properties producerProps = new Properties();
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
            for (TopicPartition tp : all) {
                for (int i = 0; i < RECORDS_PER_PARTITION; i++) {
                    long timestamp = BASE_TIMESTAMP + i * 1000L + tp.partition() * 100L;
                    producer.send(new ProducerRecord<>(tp.topic(), tp.partition(), timestamp,
                                                       "k" + i, tp + "/" + i)).get();
                }
            }
        }
        System.out.println("set up: " + all.size() + " partitions, " + RECORDS_PER_PARTITION
                           + " records each");
    }

    // Poll every member in turn until `settled` holds; say so when it never does.
    void pollUntil(String what, List<Member> members, BooleanSupplier settled) {
        long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
        while (!settled.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                System.out.println("  TIMED OUT waiting for " + what);
                return;
            }
            for (Member member : members) {
                member.poll();
            }
        }
    }

    // Whether the members together own every partition once, each of them some, all in
    // one generation.
    boolean covers(List<Member> members) {
        Set<TopicPartition> seen = new HashSet<>();
        int generation = members.get(0).consumer.groupMetadata().generationId();
        for (Member member : members) {
            Set<TopicPartition> owned = member.consumer.assignment();
            if (owned.isEmpty() || member.consumer.groupMetadata().generationId() != generation) {
                return false;
            }
            for (TopicPartition tp : owned) {
                if (!seen.add(tp)) {
                    return false;
                }
            }
        }
        return seen.size() == all.size();
    }

    void settle(String step, List<Member> members) {
        System.out.println(step);
        pollUntil(step, members, () -> covers(members));
        for (Member member : members) {
            member.print();
        }
    }

    void joinAndLeave(String label, String group, String assignor) {
        System.out.println("== " + label + " (" + assignor.replaceAll(".*\\.", "") + ")");
        Member first = new Member(label + "-1", group, assignor, null);
        settle("first member joins", List.of(first));
        Member second = new Member(label + "-2", group, assignor, null);
        settle("second member joins", List.of(first, second));
        Member third = new Member(label + "-3", group, assignor, null);
        settle("third member joins", List.of(first, second, third));
        System.out.println("second member leaves");
        second.close();
        settle("remaining members settle", List.of(first, third));
        System.out.println("first member leaves");
        first.close();
        settle("last member settles", List.of(third));
        third.close();
        describeGroup(group);
    }

    void staticMembers(String group) {
        String assignor = RangeAssignor.class.getName();
        System.out.println("== static membership (RangeAssignor, group.instance.id)");
        Member one = new Member("static-1", group, assignor, "instance-1");
        settle("static-1 joins", List.of(one));
        Member two = new Member("static-2", group, assignor, "instance-2");
        settle("static-2 joins", List.of(one, two));
        int generation = one.consumer.groupMetadata().generationId();
        describeGroup(group);
        // A static member's close sends no LeaveGroup: the group keeps its place, and the
        // same instance id coming back gets the same partitions.
        System.out.println("static-2 closes and comes back with the same instance id");
        two.close();
        Member twoAgain = new Member("static-2b", group, assignor, "instance-2");
        settle("static-2b settles", List.of(one, twoAgain));
        System.out.println("  generation unchanged: "
                           + (one.consumer.groupMetadata().generationId() == generation));
        describeGroup(group);
        System.out.println("a third static member joins");
        Member three = new Member("static-3", group, assignor, "instance-3");
        settle("three static members settle", List.of(one, twoAgain, three));
        one.close();
        twoAgain.close();
        three.close();
    }

    void describeGroup(String group) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                .describedGroups().get(group).get();
            System.out.println("describe " + group + ": state=" + d.state() + " assignor="
                               + d.partitionAssignor() + " simple=" + d.isSimpleConsumerGroup()
                               + " coordinator=" + d.coordinator().id());
            List<MemberDescription> members = new ArrayList<>(d.members());
            members.sort(Comparator.comparing(MemberDescription::clientId));
            for (MemberDescription m : members) {
                System.out.println("  member client=" + m.clientId() + " instance="
                                   + m.groupInstanceId().orElse("-") + " host=" + m.host()
                                   + " assignment=" + sorted(m.assignment().topicPartitions()));
            }
        } catch (Exception e) {
            System.out.println("describe " + group + ": " + error(e));
        }
    }

    void positions(String group) {
        System.out.println("== assigned partitions: seek, pause, resume, offsetsForTimes, commit");
        TopicPartition a0 = new TopicPartition(topicA, 0);
        TopicPartition a1 = new TopicPartition(topicA, 1);
        TopicPartition b0 = new TopicPartition(topicB, 0);
        Properties props = consumerProps(group, "positions");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> owned = List.of(a0, a1);
            consumer.assign(owned);
            System.out.println("beginning " + new TreeMap<>(names(consumer.beginningOffsets(owned))));
            System.out.println("end " + new TreeMap<>(names(consumer.endOffsets(owned))));
            consumer.seek(a0, 2);
            System.out.println("seek " + a0 + " 2, " + a1 + " from its reset (earliest)");
            printRecords(pollRecords(consumer, Map.of(a0, 2, a1, RECORDS_PER_PARTITION)));
            for (TopicPartition tp : owned) {
                System.out.println("position " + tp + " " + consumer.position(tp));
            }

            consumer.seekToBeginning(owned);
            consumer.pause(List.of(a1));
            System.out.println("seekToBeginning, pause " + a1 + ": paused=" + sorted(consumer.paused()));
            List<ConsumerRecord<String, String>> got =
                pollRecords(consumer, Map.of(a0, RECORDS_PER_PARTITION));
            printRecords(got);
            System.out.println("position " + a1 + " while paused " + consumer.position(a1));
            consumer.resume(List.of(a1));
            System.out.println("resume " + a1 + ": paused=" + sorted(consumer.paused()));
            printRecords(pollRecords(consumer, Map.of(a1, RECORDS_PER_PARTITION)));

            Map<TopicPartition, Long> times = new HashMap<>();
            times.put(a0, BASE_TIMESTAMP + 1500);  // between the second and third record
            times.put(a1, BASE_TIMESTAMP + 1100);  // exactly the second record's
            times.put(b0, BASE_TIMESTAMP + 60_000);  // after every record
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(times);
            for (TopicPartition tp : sorted(found.keySet())) {
                OffsetAndTimestamp o = found.get(tp);
                System.out.println("offsetsForTimes " + tp + " " + times.get(tp) + " -> "
                                   + (o == null ? "null" : "offset=" + o.offset() + " timestamp="
                                      + o.timestamp() + " leaderEpoch=" + o.leaderEpoch()));
            }
            System.out.println("offsetsForTimes " + a0 + " " + BASE_TIMESTAMP + " -> "
                               + consumer.offsetsForTimes(Map.of(a0, BASE_TIMESTAMP)).get(a0));

            consumer.seekToEnd(owned);
            for (TopicPartition tp : owned) {
                System.out.println("seekToEnd position " + tp + " " + consumer.position(tp));
            }
            consumer.seek(a0, new OffsetAndMetadata(1, "one"));
            System.out.println("seek with metadata: position " + a0 + " " + consumer.position(a0));

            consumer.commitSync(Map.of(a0, new OffsetAndMetadata(3, "checkpoint a0")));
            consumer.commitSync();  // the current positions of both
            Map<TopicPartition, OffsetAndMetadata> committed =
                consumer.committed(Set.of(a0, a1, b0));
            for (TopicPartition tp : List.of(a0, a1, b0)) {
                OffsetAndMetadata om = committed.get(tp);
                System.out.println("committed " + tp + " " + (om == null ? "null"
                    : "offset=" + om.offset() + " leaderEpoch=" + om.leaderEpoch()
                    + " metadata='" + om.metadata() + "'"));
            }
            consumer.unsubscribe();
            System.out.println("assignment after unsubscribe " + consumer.assignment());
        }
    }

    // Poll until each partition of `want` has given that many records.
    List<ConsumerRecord<String, String>> pollRecords(KafkaConsumer<String, String> consumer,
                                                    Map<TopicPartition, Integer> want) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + STEP_TIMEOUT_MS;
        while (System.currentTimeMillis() < deadline) {
            boolean done = true;
            for (Map.Entry<TopicPartition, Integer> e : want.entrySet()) {
                long n = got.stream().filter(r -> r.topic().equals(e.getKey().topic())
                                             && r.partition() == e.getKey().partition()).count();
                done &= n >= e.getValue();
            }
            if (done) {
                return got;
            }
            consumer.poll(Duration.ofMillis(100)).forEach(got::add);
        }
        System.out.println("TIMED OUT waiting for records " + want);
        return got;
    }

    static void printRecords(List<ConsumerRecord<String, String>> records) {
        records.sort(Comparator.comparing((ConsumerRecord<String, String> r) -> r.topic())
                     .thenComparingInt(ConsumerRecord::partition)
                     .thenComparingLong(ConsumerRecord::offset));
        for (ConsumerRecord<String, String> r : records) {
            System.out.println("  record " + r.topic() + "-" + r.partition() + " offset="
                               + r.offset() + " " + r.timestampType() + "=" + r.timestamp()
                               + " key=" + r.key() + " value=" + r.value()
                               + " leaderEpoch=" + r.leaderEpoch());
        }
    }

    static <V> Map<String, V> names(Map<TopicPartition, V> byPartition) {
        return byPartition.entrySet().stream()
            .collect(Collectors.toMap(e -> e.getKey().toString(), Map.Entry::getValue));
    }

    static List<TopicPartition> sorted(Collection<TopicPartition> partitions) {
        List<TopicPartition> out = new ArrayList<>(partitions);
        out.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        return out;
    }

    static String error(Throwable e) {
        Throwable cause = e.getCause() != null ? e.getCause() : e;
        return cause.getClass().getSimpleName() + ": " + cause.getMessage();
    }
}
