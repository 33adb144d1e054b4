package strata.javatests;

import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.function.Predicate;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Kafka's Admin client, one step after another on a topic of the run's own, each step's answer (or its
 * exception's class) recorded under the step's name: topics, partitions, configs (describe, alter
 * incrementally, the legacy alter), DeleteRecords, the cluster, and consumer groups (list, describe, reset
 * offsets, delete). The steps and their order are the same against Strata and the reference broker.
 *
 * <pre>
 *   admin bootstrap topic group
 * </pre>
 */
final class AdminChecks {
    private AdminChecks() {}

    static Map<String, Object> create(Map<String, String> opts) throws Exception {
        try (Admin admin = Admin.create(Clients.base(opts))) {
            int partitions = Integer.parseInt(opts.get("partitions"));
            admin.createTopics(List.of(new NewTopic(opts.get("topic"), partitions, (short) 1))).all().get();
        }
        return Map.of("created", true);
    }

    static Map<String, Object> run(Map<String, String> opts) throws Exception {
        Properties p = Clients.base(opts);
        String topic = opts.get("topic");
        String group = opts.get("group");
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin admin = Admin.create(p)) {
            step(out, "create", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1)
                        .configs(Map.of("retention.ms", "86400000")))).all().get();
                return "ok";
            });
            step(out, "create_again", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
                return "ok";
            });
            step(out, "listed", () -> admin.listTopics().names().get().contains(topic));
            step(out, "describe", () -> describe(admin, topic));
            step(out, "add_partitions", () -> {
                admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
                return describe(admin, topic);
            });
            step(out, "fewer_partitions", () -> {
                admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get();
                return "ok";
            });
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            step(out, "configs", () -> configs(admin, resource, List.of("retention.ms", "cleanup.policy",
                    "max.message.bytes", "min.cleanable.dirty.ratio")));
            step(out, "incremental_alter", () -> {
                admin.incrementalAlterConfigs(Map.of(resource, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"),
                                AlterConfigOp.OpType.SET)))).all().get();
                return applied(admin, resource, List.of("retention.ms", "cleanup.policy"),
                        c -> "3600000".equals(value(c, "retention.ms"))
                                && "compact".equals(value(c, "cleanup.policy")));
            });
            step(out, "incremental_delete", () -> {
                admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                        new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get();
                return applied(admin, resource, List.of("retention.ms", "cleanup.policy"),
                        c -> !"3600000".equals(value(c, "retention.ms")));
            });
            step(out, "bad_config", () -> {
                admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                        new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get();
                return "ok";
            });
            step(out, "cluster", () -> {
                DescribeClusterResult cluster = admin.describeCluster();
                return Map.of("nodes", cluster.nodes().get().size(),
                        "controller", cluster.controller().get() != null);
            });
            step(out, "delete_records_past_end", () -> {
                admin.deleteRecords(Map.of(new TopicPartition(topic, 0), RecordsToDelete.beforeOffset(5)))
                        .all().get();
                return "ok";
            });
            step(out, "groups", () -> groups(admin, topic, group));
            step(out, "delete", () -> {
                admin.deleteTopics(List.of(topic)).all().get();
                // Kafka takes a deleted topic out of its metadata asynchronously: under load the reference
                // broker lists it a moment longer. Whether it is gone within the deadline is the answer.
                long deadline = System.currentTimeMillis() + 15_000;
                while (admin.listTopics().names().get().contains(topic)
                        && System.currentTimeMillis() < deadline) {
                    Thread.sleep(50);
                }
                return admin.listTopics().names().get().contains(topic);
            });
            step(out, "describe_deleted", () -> describe(admin, topic));
        }
        return out;
    }

    private static void step(Map<String, Object> out, String name, Callable<Object> body) {
        try {
            out.put(name, body.call());
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            out.put(name, "error: " + cause.getClass().getSimpleName());
        }
    }

    private static Map<String, Object> describe(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("partitions", d.partitions().size());
        out.put("replicas", d.partitions().get(0).replicas().size());
        out.put("internal", d.isInternal());
        return out;
    }

    /**
     * The configs once they show an alteration just made (``done``), or as they are after 15 s. Kafka applies
     * an alteration to the broker's metadata after answering it, so under load a describe right after may
     * still show the previous value; whether the change shows within the deadline is the answer.
     */
    private static Map<String, Object> applied(Admin admin, ConfigResource resource, Collection<String> names,
            Predicate<Map<String, Object>> done) throws Exception {
        long deadline = System.currentTimeMillis() + 15_000;
        Map<String, Object> seen = configs(admin, resource, names);
        while (!done.test(seen) && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
            seen = configs(admin, resource, names);
        }
        return seen;
    }

    private static String value(Map<String, Object> configs, String name) {
        Object entry = configs.get(name);
        return entry instanceof List<?> pair ? String.valueOf(pair.get(0)) : null;
    }

    private static Map<String, Object> configs(Admin admin, ConfigResource resource, Collection<String> names)
            throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        Map<String, Object> out = new TreeMap<>();
        for (String name : names) {
            ConfigEntry entry = config.get(name);
            out.put(name, entry == null ? null : List.of(String.valueOf(entry.value()), entry.source().name()));
        }
        return out;
    }

    private static Map<String, Object> groups(Admin admin, String topic, String group) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        TopicPartition tp = new TopicPartition(topic, 0);
        admin.alterConsumerGroupOffsets(group, Map.of(tp, new OffsetAndMetadata(0))).all().get();
        out.put("listed", admin.listConsumerGroups().all().get().stream().anyMatch(g -> g.groupId().equals(group)));
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        out.put("state", d.groupState().name());
        out.put("members", d.members().size());
        Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        List<Object> committed = new ArrayList<>();
        offsets.forEach((k, v) -> committed.add(List.of(k.toString(), v.offset())));
        out.put("offsets", committed);
        admin.deleteConsumerGroups(List.of(group)).all().get();
        out.put("after_delete",
                admin.listConsumerGroups().all().get().stream().anyMatch(g -> g.groupId().equals(group)));
        return out;
    }
}
