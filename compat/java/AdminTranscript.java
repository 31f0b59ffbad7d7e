// The AdminClient scenario of Moldau's reference lab (docs/compat.md): kafka-clients
// 3.9.1's Admin calls that Moldau implements, each with its answers and its errors, one
// line per observation. Every line holds what a broker decided (partition counts,
// configs and their sources, offsets, error classes and messages), never a clock reading.
//
//   java -cp <kafka jars>:<classes> AdminTranscript BOOTSTRAP PREFIX
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class AdminTranscript {
    static final long BASE_TIMESTAMP = 1_700_000_000_000L;
    // The broker configs compared: a fixed list, since the two brokers' full lists differ
    // in what only one of them has (Moldau's own settings, Kafka's KRaft-only ones).
    static final List<String> BROKER_CONFIGS = List.of(
        "auto.create.topics.enable", "broker.id", "compression.type", "default.replication.factor",
        "log.cleanup.policy", "log.retention.hours", "log.retention.ms", "log.segment.bytes",
        "message.max.bytes", "min.insync.replicas", "num.partitions",
        "offsets.topic.replication.factor", "unclean.leader.election.enable");

    final Admin admin;
    final String bootstrap;
    final String prefix;
    final String topic;      // 3 partitions, then 5, with configs
    final String missing;    // never created
    org.apache.kafka.common.Uuid createdId;

    AdminTranscript(Admin admin, String bootstrap, String prefix) {
        this.admin = admin;
        this.bootstrap = bootstrap;
        this.prefix = prefix;
        this.topic = prefix + "-t";
        this.missing = prefix + "-missing";
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        // The client retries a call whose broker it cannot find until this runs out (a
        // broker id or partition that does not exist): the scenario makes no such call,
        // and a mistake should cost seconds, not minutes.
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        try (Admin admin = Admin.create(props)) {
            AdminTranscript t = new AdminTranscript(admin, args[0], args[1]);
            t.createTopics();
            t.createPartitions();
            t.describeTopics();
            t.configs();
            t.records();
            t.groups();
            t.reassignments();
            t.elections();
            t.logDirs();
            t.cluster();
            t.deleteTopics();
        }
    }

    // ---- topics and partitions

    void createTopics() throws Exception {
        System.out.println("== createTopics");
        Map<String, String> configs = new TreeMap<>(Map.of(
            "cleanup.policy", "compact,delete", "retention.ms", "-1",
            "min.insync.replicas", "1", "segment.bytes", "1048576"));
        NewTopic main = new NewTopic(topic, 3, (short) 1).configs(configs);
        CreateTopicsResult result = admin.createTopics(List.of(main));
        show("create " + topic, result.all());
        System.out.println("  partitions=" + result.numPartitions(topic).get()
                           + " replicationFactor=" + result.replicationFactor(topic).get()
                           + " topicIdSet=" + (result.topicId(topic).get() != null));
        createdId = result.topicId(topic).get();
        printConfig("  ", result.config(topic).get(), true);

        String checked = prefix + "-validated";
        CreateTopicsResult validated = admin.createTopics(
            List.of(new NewTopic(checked, 2, (short) 1)), new CreateTopicsOptions().validateOnly(true));
        show("create " + checked + " validateOnly", validated.all());
        System.out.println("  partitions=" + validated.numPartitions(checked).get()
                           + " replicationFactor=" + validated.replicationFactor(checked).get());
        show("describe " + checked + " after validateOnly",
             admin.describeTopics(List.of(checked)).allTopicNames());

        show("create " + topic + " again", admin.createTopics(List.of(main)).all());
        show("create with replication factor 3", admin.createTopics(
            List.of(new NewTopic(prefix + "-rf3", 1, (short) 3))).all());
        show("create with an unknown config", admin.createTopics(List.of(
            new NewTopic(prefix + "-badconfig", 1, (short) 1).configs(Map.of("no.such.config", "1"))))
            .all());
        show("create with an invalid config value", admin.createTopics(List.of(
            new NewTopic(prefix + "-badvalue", 1, (short) 1).configs(Map.of("cleanup.policy", "shred"))))
            .all());
        show("create with an invalid name", admin.createTopics(
            List.of(new NewTopic(prefix + "-bad/name", 1, (short) 1))).all());
        // The broker's defaults: -1 partitions and replication factor (CreateTopics v4+).
        String defaults = prefix + "-defaults";
        CreateTopicsResult byDefault = admin.createTopics(
            List.of(new NewTopic(defaults, Optional.empty(), Optional.empty())));
        show("create " + defaults + " with the broker's defaults", byDefault.all());
        System.out.println("  partitions=" + byDefault.numPartitions(defaults).get()
                           + " replicationFactor=" + byDefault.replicationFactor(defaults).get());
    }

    void createPartitions() throws Exception {
        System.out.println("== createPartitions");
        show("validateOnly to 4", admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4)),
            new CreatePartitionsOptions().validateOnly(true)).all());
        show("to 5", admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all());
        show("to 4 (fewer)", admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all());
        show("to 5 (the same)", admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all());
        show("with a replica on a missing broker", admin.createPartitions(Map.of(topic,
            NewPartitions.increaseTo(6, List.of(List.of(7))))).all());
        show("a missing topic", admin.createPartitions(Map.of(missing, NewPartitions.increaseTo(2))).all());
    }

    void describeTopics() throws Exception {
        System.out.println("== describeTopics");
        Map<String, TopicDescription> found = admin.describeTopics(List.of(topic),
            new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames().get();
        TopicDescription d = found.get(topic);
        System.out.println("topic " + d.name() + " internal=" + d.isInternal() + " operations="
                           + new java.util.TreeSet<>(d.authorizedOperations()));
        for (TopicPartitionInfo p : d.partitions()) {
            System.out.println("  partition " + p.partition() + " leader=" + id(p.leader())
                               + " replicas=" + ids(p.replicas()) + " isr=" + ids(p.isr()));
        }
        show("describe " + missing, admin.describeTopics(List.of(missing)).allTopicNames());
        System.out.println("topic id as createTopics gave it: " + d.topicId().equals(createdId));
        showValue("describe by topic id", admin.describeTopics(
            org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(d.topicId()))).allTopicIds(),
            byId -> byId.values().stream().map(TopicDescription::name).collect(Collectors.toList())
                .toString());
        showValue("describe by an unknown topic id", admin.describeTopics(
            org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(org.apache.kafka.common.Uuid.ONE_UUID)))
            .allTopicIds(), byId -> byId.keySet().toString());
        boolean listed = admin.listTopics().names().get().contains(topic);
        System.out.println("listTopics contains " + topic + ": " + listed);
    }

    // ---- configs

    void configs() throws Exception {
        System.out.println("== describeConfigs");
        ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
        printOverrides("topic " + topic, topicResource);
        printConfig("  ", admin.describeConfigs(List.of(topicResource)).all().get().get(topicResource),
                    false);
        Config brokerConfig = admin.describeConfigs(List.of(broker)).all().get().get(broker);
        System.out.println("broker 1 (selected entries)");
        for (String name : BROKER_CONFIGS) {
            ConfigEntry e = brokerConfig.get(name);
            System.out.println("  " + (e == null ? name + " absent" : entry(e)));
        }
        show("describe a missing topic's configs", admin.describeConfigs(
            List.of(new ConfigResource(ConfigResource.Type.TOPIC, missing))).all());

        System.out.println("== incrementalAlterConfigs");
        alter("set retention.ms, delete segment.bytes", topicResource,
              new AlterConfigOp(new ConfigEntry("retention.ms", "86400000"), AlterConfigOp.OpType.SET),
              new AlterConfigOp(new ConfigEntry("segment.bytes", ""), AlterConfigOp.OpType.DELETE));
        alter("subtract compact from cleanup.policy", topicResource,
              new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SUBTRACT));
        alter("append compact to cleanup.policy", topicResource,
              new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND));
        printOverrides("topic " + topic, topicResource);
        show("validateOnly set max.message.bytes", admin.incrementalAlterConfigs(
            Map.of(topicResource, List.of(new AlterConfigOp(new ConfigEntry("max.message.bytes", "2048"),
                                                            AlterConfigOp.OpType.SET))),
            new AlterConfigsOptions().validateOnly(true)).all());
        alter("an unknown config", topicResource,
              new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET));
        alter("an invalid value", topicResource,
              new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET));
        alter("append to a non-list config", topicResource,
              new AlterConfigOp(new ConfigEntry("retention.ms", "5"), AlterConfigOp.OpType.APPEND));
        alter("a missing topic", new ConfigResource(ConfigResource.Type.TOPIC, missing),
              new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET));
        show("broker 1: validateOnly set a read-only config", admin.incrementalAlterConfigs(
            Map.of(broker, List.of(new AlterConfigOp(new ConfigEntry("broker.id", "9"),
                                                     AlterConfigOp.OpType.SET))),
            new AlterConfigsOptions().validateOnly(true)).all());
        printOverrides("topic " + topic, topicResource);

        System.out.println("== alterConfigs (legacy: replaces every override)");
        legacyAlter("retention.ms and max.message.bytes", topicResource,
                    new ConfigEntry("retention.ms", "3600000"), new ConfigEntry("max.message.bytes", "4096"));
        printOverrides("topic " + topic, topicResource);
        legacyAlter("an unknown config", topicResource, new ConfigEntry("no.such.config", "1"));
        legacyAlter("a missing topic", new ConfigResource(ConfigResource.Type.TOPIC, missing),
                    new ConfigEntry("retention.ms", "1"));
        legacyAlter("retention.ms=-1 only", topicResource, new ConfigEntry("retention.ms", "-1"));
        printOverrides("topic " + topic, topicResource);
    }

    void alter(String label, ConfigResource resource, AlterConfigOp... ops) {
        show(label, admin.incrementalAlterConfigs(Map.of(resource, List.of(ops))).all());
    }

    @SuppressWarnings("deprecation")
    void legacyAlter(String label, ConfigResource resource, ConfigEntry... entries) {
        show(label, admin.alterConfigs(Map.of(resource, new Config(List.of(entries)))).all());
    }

    void printOverrides(String label, ConfigResource resource) throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        List<String> overrides = config.entries().stream()
            .filter(e -> e.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG)
            .map(e -> e.name() + "=" + e.value()).sorted().collect(Collectors.toList());
        System.out.println(label + " overrides " + overrides);
    }

    static void printConfig(String indent, Config config, boolean withoutSynonyms) {
        List<ConfigEntry> entries = new ArrayList<>(config.entries());
        entries.sort(Comparator.comparing(ConfigEntry::name));
        for (ConfigEntry e : entries) {
            System.out.println(indent + entry(e));
        }
    }

    static String entry(ConfigEntry e) {
        return e.name() + "=" + e.value() + " source=" + e.source() + " readOnly=" + e.isReadOnly()
            + " sensitive=" + e.isSensitive() + " type=" + e.type();
    }

    // ---- records and offsets

    void records() throws Exception {
        System.out.println("== records: listOffsets, deleteRecords");
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < 6; i++) {
                // partition 0 gets timestamps out of order: the maximum is not the last record
                long timestamp = BASE_TIMESTAMP + (i == 3 ? 9000 : i * 1000L);
                producer.send(new ProducerRecord<>(topic, 0, timestamp, "k" + i, "v" + i)).get();
                producer.send(new ProducerRecord<>(topic, 1, BASE_TIMESTAMP + i, "k" + i, "v" + i)).get();
            }
        }
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        TopicPartition p2 = new TopicPartition(topic, 2);
        listOffsets("earliest", OffsetSpec.earliest(), p0, p1, p2);
        listOffsets("latest", OffsetSpec.latest(), p0, p1, p2);
        listOffsets("maxTimestamp", OffsetSpec.maxTimestamp(), p0, p1, p2);
        listOffsets("forTimestamp +1500", OffsetSpec.forTimestamp(BASE_TIMESTAMP + 1500), p0, p1);
        listOffsets("forTimestamp +100000", OffsetSpec.forTimestamp(BASE_TIMESTAMP + 100_000), p0);
        ListOffsetsResult committedOnly = admin.listOffsets(Map.of(p0, OffsetSpec.latest()),
            new ListOffsetsOptions(IsolationLevel.READ_COMMITTED));
        System.out.println("latest read_committed " + p0 + " offset="
                           + committedOnly.partitionResult(p0).get().offset());
        show("latest of a missing topic", admin.listOffsets(
            Map.of(new TopicPartition(missing, 0), OffsetSpec.latest())).all());

        showValue("deleteRecords " + p0 + " before 2", admin.deleteRecords(
            Map.of(p0, RecordsToDelete.beforeOffset(2))).lowWatermarks().get(p0),
            lw -> "lowWatermark=" + lw.lowWatermark());
        showValue("deleteRecords " + p1 + " before the high watermark (-1)", admin.deleteRecords(
            Map.of(p1, RecordsToDelete.beforeOffset(-1))).lowWatermarks().get(p1),
            lw -> "lowWatermark=" + lw.lowWatermark());
        show("deleteRecords beyond the high watermark", admin.deleteRecords(
            Map.of(p2, RecordsToDelete.beforeOffset(50))).all());
        listOffsets("earliest after deleteRecords", OffsetSpec.earliest(), p0, p1, p2);
        listOffsets("latest after deleteRecords", OffsetSpec.latest(), p0, p1, p2);
    }

    void listOffsets(String label, OffsetSpec spec, TopicPartition... partitions) throws Exception {
        Map<TopicPartition, OffsetSpec> wanted = new HashMap<>();
        for (TopicPartition tp : partitions) {
            wanted.put(tp, spec);
        }
        var result = admin.listOffsets(wanted).all().get();
        for (TopicPartition tp : partitions) {
            ListOffsetsResult.ListOffsetsResultInfo info = result.get(tp);
            System.out.println(label + " " + tp + " offset=" + info.offset() + " timestamp="
                               + info.timestamp() + " leaderEpoch=" + info.leaderEpoch());
        }
    }

    // ---- groups

    void groups() throws Exception {
        System.out.println("== consumer groups");
        String group = prefix + "-group";
        String simple = prefix + "-simple";
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "admin-scenario-member");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (consumer.assignment().size() < 5 && System.currentTimeMillis() < deadline) {
                consumer.poll(Duration.ofMillis(100));
            }
            consumer.commitSync(Map.of(p0, new OffsetAndMetadata(4, "four"),
                                       p1, new OffsetAndMetadata(2)));
            System.out.println("member joined, assignment " + consumer.assignment().size()
                               + " partitions, committed " + p0 + " and " + p1);
            show("alterConsumerGroupOffsets while the member is in", admin.alterConsumerGroupOffsets(
                group, Map.of(p0, new OffsetAndMetadata(1))).all());
            show("deleteConsumerGroupOffsets of a subscribed topic", admin.deleteConsumerGroupOffsets(
                group, Set.of(p0)).all());
            show("deleteConsumerGroups with a member", admin.deleteConsumerGroups(List.of(group)).all());
            listGroups("listConsumerGroups with the member in");
            describeGroups(List.of(group, prefix + "-nobody"));
            listGroupOffsets(group);
        }
        System.out.println("member left");
        describeGroups(List.of(group));
        show("alterConsumerGroupOffsets " + p0 + "=1, " + p1 + "=5", admin.alterConsumerGroupOffsets(
            group, Map.of(p0, new OffsetAndMetadata(1, "reset"), p1, new OffsetAndMetadata(5))).all());
        show("alterConsumerGroupOffsets of a missing topic", admin.alterConsumerGroupOffsets(
            group, Map.of(new TopicPartition(missing, 0), new OffsetAndMetadata(1))).all());
        listGroupOffsets(group);
        show("deleteConsumerGroupOffsets " + p1, admin.deleteConsumerGroupOffsets(group, Set.of(p1)).all());
        show("deleteConsumerGroupOffsets of a partition without one", admin.deleteConsumerGroupOffsets(
            group, Set.of(new TopicPartition(topic, 3))).all());
        show("deleteConsumerGroupOffsets of a missing group", admin.deleteConsumerGroupOffsets(
            prefix + "-nobody", Set.of(p1)).all());
        listGroupOffsets(group);
        show("alterConsumerGroupOffsets creates " + simple, admin.alterConsumerGroupOffsets(
            simple, Map.of(p1, new OffsetAndMetadata(3))).all());
        listGroups("listConsumerGroups");
        describeGroups(List.of(simple));
        show("deleteConsumerGroups " + group + ", " + simple,
             admin.deleteConsumerGroups(List.of(group, simple)).all());
        show("deleteConsumerGroups of a missing group",
             admin.deleteConsumerGroups(List.of(prefix + "-nobody")).all());
        listGroups("listConsumerGroups after deletion");
        listGroupOffsets(group);
    }

    void listGroups(String label) throws Exception {
        Collection<ConsumerGroupListing> all = admin.listConsumerGroups().all().get();
        List<String> ours = all.stream().filter(g -> g.groupId().startsWith(prefix))
            .map(g -> g.groupId() + " state=" + g.state().map(Object::toString).orElse("?")
                 + " simple=" + g.isSimpleConsumerGroup() + " type="
                 + g.type().map(Object::toString).orElse("?"))
            .sorted().collect(Collectors.toList());
        System.out.println(label + " " + ours);
    }

    void describeGroups(List<String> groups) throws Exception {
        var described = admin.describeConsumerGroups(groups,
            new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).describedGroups();
        for (String group : groups) {
            try {
                ConsumerGroupDescription d = described.get(group).get();
                System.out.println("describe " + group + ": state=" + d.state() + " type=" + d.type()
                                   + " simple=" + d.isSimpleConsumerGroup() + " assignor='"
                                   + d.partitionAssignor() + "' coordinator=" + id(d.coordinator())
                                   + " operations=" + new java.util.TreeSet<>(
                                       Optional.ofNullable(d.authorizedOperations()).orElse(Set.of())));
                for (MemberDescription m : d.members()) {
                    System.out.println("  member client=" + m.clientId() + " host=" + m.host()
                                       + " instance=" + m.groupInstanceId().orElse("-")
                                       + " assignment=" + m.assignment().topicPartitions().size()
                                       + " partitions");
                }
            } catch (ExecutionException e) {
                System.out.println("describe " + group + ": " + error(e));
            }
        }
    }

    void listGroupOffsets(String group) throws Exception {
        try {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Map<String, String> shown = new TreeMap<>();
            offsets.forEach((tp, om) -> shown.put(tp.toString(), om == null ? "null"
                : "offset=" + om.offset() + " leaderEpoch=" + om.leaderEpoch() + " metadata='"
                + om.metadata() + "'"));
            System.out.println("listConsumerGroupOffsets " + group + " " + shown);
        } catch (ExecutionException e) {
            System.out.println("listConsumerGroupOffsets " + group + ": " + error(e));
        }
    }

    // ---- reassignments, elections, log dirs, cluster

    void reassignments() throws Exception {
        System.out.println("== partition reassignments (one broker)");
        TopicPartition p0 = new TopicPartition(topic, 0);
        show("reassign to a missing broker", admin.alterPartitionReassignments(
            Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(7))))).all());
        show("reassign to two replicas, one missing", admin.alterPartitionReassignments(
            Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(1, 7))))).all());
        show("reassign to a duplicated replica", admin.alterPartitionReassignments(
            Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(1, 1))))).all());
        show("reassign to a negative broker id", admin.alterPartitionReassignments(
            Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(-1))))).all());
        show("reassign a missing topic", admin.alterPartitionReassignments(
            Map.of(new TopicPartition(missing, 0), Optional.of(new NewPartitionReassignment(List.of(1)))))
            .all());
        show("cancel where none is in progress", admin.alterPartitionReassignments(
            Map.of(p0, Optional.empty())).all());
        show("reassign to the current replica", admin.alterPartitionReassignments(
            Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(1))))).all());
        Map<TopicPartition, PartitionReassignment> ongoing =
            admin.listPartitionReassignments().reassignments().get();
        System.out.println("listPartitionReassignments (ours) " + ongoing.keySet().stream()
            .filter(tp -> tp.topic().startsWith(prefix)).map(Object::toString).sorted()
            .collect(Collectors.toList()));
        showValue("listPartitionReassignments of " + p0 + " and a missing topic",
            admin.listPartitionReassignments(Set.of(p0, new TopicPartition(missing, 0))).reassignments(),
            found -> found.keySet().toString());
    }

    void elections() {
        System.out.println("== electLeaders");
        TopicPartition p0 = new TopicPartition(topic, 0);
        for (ElectionType type : ElectionType.values()) {
            var result = admin.electLeaders(type, Set.of(p0, new TopicPartition(missing, 0),
                                                         new TopicPartition(topic, 9)));
            try {
                Map<TopicPartition, Optional<Throwable>> byPartition = result.partitions().get();
                for (TopicPartition tp : sortedPartitions(byPartition.keySet())) {
                    System.out.println("elect " + type + " " + tp + ": "
                                       + byPartition.get(tp).map(AdminTranscript::describe).orElse("ok"));
                }
            } catch (Exception e) {
                System.out.println("elect " + type + ": " + error(e));
            }
        }
        try {
            Map<TopicPartition, Optional<Throwable>> all =
                admin.electLeaders(ElectionType.PREFERRED, null).partitions().get();
            System.out.println("elect PREFERRED of every partition: results for ours "
                + all.keySet().stream().filter(tp -> tp.topic().startsWith(prefix)).count());
        } catch (Exception e) {
            System.out.println("elect PREFERRED of every partition: " + error(e));
        }
    }

    void logDirs() throws Exception {
        System.out.println("== describeLogDirs");
        Map<String, LogDirDescription> dirs =
            admin.describeLogDirs(List.of(1)).descriptions().get(1).get();
        for (Map.Entry<String, LogDirDescription> e : new TreeMap<>(dirs).entrySet()) {
            LogDirDescription d = e.getValue();
            System.out.println("log dir " + e.getKey() + " error=" + d.error()
                               + " totalBytesKnown=" + d.totalBytes().isPresent()
                               + " usableBytesKnown=" + d.usableBytes().isPresent());
            Map<String, String> ours = new TreeMap<>();
            for (Map.Entry<TopicPartition, ReplicaInfo> r : d.replicaInfos().entrySet()) {
                if (r.getKey().topic().startsWith(prefix)) {
                    ReplicaInfo info = r.getValue();
                    ours.put(r.getKey().toString(), "size=" + info.size() + " offsetLag="
                             + info.offsetLag() + " future=" + info.isFuture());
                }
            }
            ours.forEach((tp, info) -> System.out.println("  " + tp + " " + info));
        }
    }

    void cluster() throws Exception {
        System.out.println("== describeCluster");
        DescribeClusterResult c = admin.describeCluster(
            new DescribeClusterOptions().includeAuthorizedOperations(true));
        String clusterId = c.clusterId().get();
        System.out.println("clusterId length=" + (clusterId == null ? -1 : clusterId.length()));
        for (Node n : c.nodes().get()) {
            System.out.println("node id=" + n.id() + " host=" + n.host() + ":" + n.port()
                               + " rack=" + n.rack());
        }
        System.out.println("controller " + id(c.controller().get()));
        System.out.println("operations " + new java.util.TreeSet<>(
            Optional.ofNullable(c.authorizedOperations().get()).orElse(Set.of())));
    }

    void deleteTopics() {
        System.out.println("== deleteTopics");
        show("delete " + topic + ", " + prefix + "-defaults",
             admin.deleteTopics(List.of(topic, prefix + "-defaults")).all());
        show("delete " + missing, admin.deleteTopics(List.of(missing)).all());
    }

    // ---- printing

    static void show(String label, KafkaFuture<?> future) {
        showValue(label, future, value -> "ok");
    }

    static <T> void showValue(String label, KafkaFuture<T> future,
                              java.util.function.Function<T, String> describe) {
        try {
            System.out.println(label + ": " + describe.apply(future.get()));
        } catch (Exception e) {
            System.out.println(label + ": " + error(e));
        }
    }

    static String error(Throwable e) {
        Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return describe(cause);
    }

    static String describe(Throwable t) {
        return t.getClass().getSimpleName() + ": " + t.getMessage();
    }

    static String id(Node node) {
        return node == null ? "none" : String.valueOf(node.id());
    }

    static List<Integer> ids(List<Node> nodes) {
        return nodes.stream().map(Node::id).collect(Collectors.toList());
    }

    static List<TopicPartition> sortedPartitions(Collection<TopicPartition> partitions) {
        List<TopicPartition> out = new ArrayList<>(partitions);
        out.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        return out;
    }
}
