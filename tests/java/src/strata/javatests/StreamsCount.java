package strata.javatests;

import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams' word count, the topology its quick start runs: a stream of lines keyed by line number is
 * regrouped by word (a repartition topic), counted (a state store with its changelog topic) and the counts
 * written to an output topic. The state cache is off, so every input record gives one output record and
 * the output is the same whatever the commit timing.
 *
 * <pre>
 *   streams bootstrap app count [timeout_ms=60000] [guarantee=at_least_once]
 * </pre>
 *
 * With guarantee=exactly_once_v2 Streams writes the counts, the changelog and the input offsets in one
 * transaction per commit, and the counts are read back with a read_committed consumer.
 *
 * The answer: each word's sequence of counts as read from the output topic, the KafkaStreams state when it
 * stopped, and the internal topics the application created (their partitions and the configs set on them).
 */
final class StreamsCount {
    private static final String[] WORDS = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"};

    private StreamsCount() {}

    static Map<String, Object> run(Map<String, String> opts) throws Exception {
        String bootstrap = opts.get("bootstrap");
        String app = opts.get("app");
        int count = Integer.parseInt(opts.get("count"));
        long timeoutMs = Long.parseLong(opts.getOrDefault("timeout_ms", "60000"));
        String guarantee = opts.getOrDefault("guarantee", StreamsConfig.AT_LEAST_ONCE);
        String input = app + "-lines";
        String output = app + "-counts";
        Properties adminProps = new Properties();
        adminProps.put("bootstrap.servers", bootstrap);
        Map<String, Object> result = new TreeMap<>();
        try (Admin admin = Admin.create(adminProps)) {
            admin.createTopics(List.of(new NewTopic(input, 3, (short) 1), new NewTopic(output, 2, (short) 1)))
                    .all()
                    .get(30, TimeUnit.SECONDS);
            produceLines(bootstrap, input, count);

            StreamsBuilder builder = new StreamsBuilder();
            builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                    .groupBy((key, word) -> word, Grouped.with("by-word", Serdes.String(), Serdes.String()))
                    .count(Materialized.as("word-counts"))
                    .toStream()
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
            Properties props = new Properties();
            props.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
            props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("strata-streams").toString());
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
            props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
            props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
            props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
            KafkaStreams streams = new KafkaStreams(builder.build(), props);
            List<String> failures = new ArrayList<>();
            streams.setUncaughtExceptionHandler(e -> {
                Throwable cause = e;
                StringBuilder chain = new StringBuilder();
                while (cause != null) {
                    chain.append(cause.getClass().getSimpleName()).append(": ").append(cause.getMessage()).append(" <- ");
                    cause = cause.getCause();
                }
                synchronized (failures) {
                    failures.add(chain.toString());
                }
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            result.put("failures", failures);
            streams.start();
            Map<String, List<Long>> counts;
            try {
                String isolation = guarantee.equals(StreamsConfig.AT_LEAST_ONCE) ? "read_uncommitted" : "read_committed";
                counts = readCounts(bootstrap, output, count, timeoutMs, isolation);
                result.put("state", streams.state().toString());
            } finally {
                streams.close(Duration.ofSeconds(30));
            }
            result.put("counts", counts);
            result.put("internal_topics", internalTopics(admin, app));
        }
        return result;
    }

    private static void produceLines(String bootstrap, String topic, int count) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                // A fixed, uneven spread of words: i*i mod 7 hits some words more than others.
                String word = WORDS[(i * i + i / 3) % WORDS.length];
                producer.send(new ProducerRecord<>(topic, Integer.toString(i), word));
            }
            producer.flush();
        }
    }

    private static Map<String, List<Long>> readCounts(
            String bootstrap, String topic, int expect, long timeoutMs, String isolation) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-reader");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        Map<String, List<Long>> counts = new TreeMap<>();
        int read = 0;
        try (KafkaConsumer<String, Long> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (read < expect && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, Long> r : consumer.poll(Duration.ofMillis(200))) {
                    counts.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
                    read++;
                }
            }
        }
        return counts;
    }

    private static Map<String, Object> internalTopics(Admin admin, String app) throws Exception {
        List<String> names = new ArrayList<>();
        for (String name : admin.listTopics().names().get(30, TimeUnit.SECONDS)) {
            if (name.startsWith(app + "-") && !name.equals(app + "-lines") && !name.equals(app + "-counts")) {
                names.add(name);
            }
        }
        Map<String, TopicDescription> described = admin.describeTopics(names).allTopicNames().get(30, TimeUnit.SECONDS);
        List<ConfigResource> resources = new ArrayList<>();
        for (String name : names) {
            resources.add(new ConfigResource(ConfigResource.Type.TOPIC, name));
        }
        Map<ConfigResource, Config> configs = admin.describeConfigs(resources).all().get(30, TimeUnit.SECONDS);
        Map<String, Object> out = new TreeMap<>();
        for (String name : names) {
            Map<String, Object> topic = new TreeMap<>();
            topic.put("partitions", described.get(name).partitions().size());
            Map<String, String> set = new TreeMap<>();
            Collection<ConfigEntry> entries = configs.get(new ConfigResource(ConfigResource.Type.TOPIC, name)).entries();
            for (ConfigEntry e : entries) {
                if (e.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG) {
                    set.put(e.name(), e.value());
                }
            }
            topic.put("configs", set);
            out.put(name.substring(app.length() + 1), topic);
        }
        return out;
    }
}
