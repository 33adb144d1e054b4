package strata.javatests;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Apache Kafka's Java producer and consumer, driven by the tests in tests/java: one scenario per run, its
 * parameters as key=value arguments, its result as one JSON object on stdout (errors as {"error": ...} with
 * the exception's class and message), so that the same run can be pointed at Strata and at the reference
 * broker and the two answers compared. {@code serve} runs scenarios read from stdin in one JVM (below).
 *
 * <pre>
 *   produce  bootstrap topic count [compression=none] [idempotence=true] [partition=-1] [base_ts=now]
 *            [config=client.properties]   (and consume: a properties file laid over the defaults)
 *   consume  bootstrap topic expect [mode=assign|subscribe] [partitions=0,1] [group=g] [assignor=range]
 *            [instance=] [commit=true] [timeout_ms=30000] [isolation=read_uncommitted]
 *   times    bootstrap topic partition timestamp
 *   admin    bootstrap topic group            (AdminChecks)
 *   admin-create bootstrap topic partitions
 *   streams  bootstrap app count [timeout_ms=60000] [guarantee=at_least_once]   (StreamsCount)
 *   txn-produce bootstrap topic txn_id [committed=5] [aborted=3]   (Transactions)
 *   serve    (then one scenario per line of stdin, tab-separated)
 * </pre>
 */
public final class Clients {
    private static final ObjectMapper JSON = new ObjectMapper();

    private Clients() {}

    /** Marks an answer line in ``serve`` mode, where the clients' own output shares stdout. */
    static final String ANSWER = "@answer ";

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("serve")) {
            serve(Clients::run);
        } else {
            System.out.println(JSON.writeValueAsString(run(args)));
            System.out.flush();
        }
        System.exit(0);
    }

    /**
     * One call per line of stdin (its arguments separated by tabs), each answer from {@code call} on one
     * line of stdout after {@link #ANSWER}, until stdin closes: one JVM serves a test process's scenarios
     * (or, from {@link Tools}, its tool runs), which spares each the JVM's start and the loading of Kafka's
     * classes. Each scenario closes the clients it opened, so none sees another's.
     */
    static void serve(java.util.function.Function<String[], Object> call) throws Exception {
        java.io.BufferedReader in = new java.io.BufferedReader(
                new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (!line.isEmpty()) {
                Object answer = call.apply(line.split("\t", -1));
                System.out.println(ANSWER + JSON.writeValueAsString(answer));
                System.out.flush();
            }
        }
    }

    /** The scenario ``args[0]`` with the key=value options after it; its answer, or its error. */
    static Object run(String[] args) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            opts.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        try {
            return switch (args[0]) {
                case "produce" -> produce(opts);
                case "consume" -> consume(opts);
                case "times" -> times(opts);
                case "admin" -> AdminChecks.run(opts);
                case "admin-create" -> AdminChecks.create(opts);
                case "streams" -> StreamsCount.run(opts);
                case "txn-produce" -> Transactions.produce(opts);
                default -> throw new IllegalArgumentException("unknown scenario " + args[0]);
            };
        } catch (Exception e) {
            Map<String, Object> error = new LinkedHashMap<>();
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            error.put("error", cause.getClass().getSimpleName());
            error.put("message", String.valueOf(cause.getMessage()));
            return error;
        }
    }

    static Properties base(Map<String, String> opts) {
        Properties p = new Properties();
        p.put("bootstrap.servers", opts.get("bootstrap"));
        p.put("client.id", "strata-java-test");
        return p;
    }

    /** ``p`` with the properties file ``config=`` names laid over it, as a user's client file would be. */
    static Properties overlay(Properties p, Map<String, String> opts) throws java.io.IOException {
        String file = opts.get("config");
        if (file != null) {
            try (java.io.Reader in = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(file))) {
                p.load(in);
            }
        }
        return p;
    }

    static Map<String, Object> produce(Map<String, String> opts) throws Exception {
        Properties p = base(opts);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, opts.getOrDefault("idempotence", "true"));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, opts.getOrDefault("compression", "none"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        String topic = opts.get("topic");
        int count = Integer.parseInt(opts.get("count"));
        int partition = Integer.parseInt(opts.getOrDefault("partition", "-1"));
        long baseTs = Long.parseLong(opts.getOrDefault("base_ts", Long.toString(System.currentTimeMillis())));
        Map<Integer, long[]> spans = new TreeMap<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(overlay(p, opts))) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                ProducerRecord<String, String> record = new ProducerRecord<>(topic,
                        partition >= 0 ? partition : null, baseTs + i, "k" + (i % 10), "v" + i);
                sent.add(producer.send(record));
            }
            for (Future<RecordMetadata> f : sent) {
                RecordMetadata m = f.get();
                long[] span = spans.computeIfAbsent(m.partition(), k -> new long[] {Long.MAX_VALUE, -1, 0});
                span[0] = Math.min(span[0], m.offset());
                span[1] = Math.max(span[1], m.offset());
                span[2]++;
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("acked", sent(spans));
        Map<String, List<Long>> byPartition = new TreeMap<>();
        spans.forEach((k, v) -> byPartition.put(Integer.toString(k), List.of(v[0], v[1], v[2])));
        out.put("partitions", byPartition);
        return out;
    }

    private static long sent(Map<Integer, long[]> spans) {
        long n = 0;
        for (long[] v : spans.values()) {
            n += v[2];
        }
        return n;
    }

    static Map<String, Object> consume(Map<String, String> opts) throws Exception {
        Properties p = base(opts);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, opts.getOrDefault("isolation", "read_uncommitted"));
        String mode = opts.getOrDefault("mode", "assign");
        String topic = opts.get("topic");
        if (mode.equals("subscribe")) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, opts.getOrDefault("group", "g"));
            String assignor = opts.getOrDefault("assignor", "range");
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, switch (assignor) {
                case "cooperative" -> "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
                case "roundrobin" -> "org.apache.kafka.clients.consumer.RoundRobinAssignor";
                default -> "org.apache.kafka.clients.consumer.RangeAssignor";
            });
            String instance = opts.getOrDefault("instance", "");
            if (!instance.isEmpty()) {
                p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
            }
        }
        int expect = Integer.parseInt(opts.get("expect"));
        long deadline = System.currentTimeMillis() + Long.parseLong(opts.getOrDefault("timeout_ms", "30000"));
        List<List<Object>> records = new ArrayList<>();
        List<String> assigned = new ArrayList<>();
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(overlay(p, opts))) {
            if (mode.equals("subscribe")) {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {}

                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        parts.forEach(tp -> assigned.add(tp.toString()));
                    }
                });
            } else {
                List<TopicPartition> parts = new ArrayList<>();
                for (String s : opts.getOrDefault("partitions", "0").split(",")) {
                    parts.add(new TopicPartition(topic, Integer.parseInt(s)));
                }
                consumer.assign(parts);
                consumer.seekToBeginning(parts);
            }
            while (records.size() < expect && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    records.add(List.of(r.partition(), r.offset(), String.valueOf(r.key()), String.valueOf(r.value())));
                }
            }
            if (mode.equals("subscribe") && Boolean.parseBoolean(opts.getOrDefault("commit", "true"))) {
                consumer.commitSync();
                Map<String, Long> committed = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e
                        : consumer.committed(consumer.assignment()).entrySet()) {
                    committed.put(Integer.toString(e.getKey().partition()),
                            e.getValue() == null ? -1L : e.getValue().offset());
                }
                out.put("committed", committed);
            }
        }
        records.sort((a, b) -> {
            int byPartition = Integer.compare((Integer) a.get(0), (Integer) b.get(0));
            return byPartition != 0 ? byPartition : Long.compare((Long) a.get(1), (Long) b.get(1));
        });
        out.put("records", records);
        out.put("assigned", assigned);
        return out;
    }

    static Map<String, Object> times(Map<String, String> opts) throws Exception {
        Properties p = base(opts);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(opts.get("topic"), Integer.parseInt(opts.get("partition")));
        long ts = Long.parseLong(opts.get("timestamp"));
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(overlay(p, opts))) {
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(Map.of(tp, ts));
            OffsetAndTimestamp hit = found.get(tp);
            out.put("offset_for_time", hit == null ? null : List.of(hit.offset(), hit.timestamp()));
            out.put("beginning", consumer.beginningOffsets(List.of(tp)).get(tp));
            out.put("end", consumer.endOffsets(List.of(tp)).get(tp));
            consumer.assign(List.of(tp));
            consumer.seekToEnd(List.of(tp));
            out.put("position_after_seek_to_end", consumer.position(tp));
        }
        return out;
    }
}
