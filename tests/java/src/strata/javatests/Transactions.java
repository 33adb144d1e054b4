package strata.javatests;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's transactional producer: one committed transaction, then one aborted, on a topic of two partitions.
 *
 * <pre>
 *   txn-produce bootstrap topic txn_id [committed=5] [aborted=3]
 * </pre>
 *
 * The first transaction writes c0..c(committed-1), alternately to partitions 0 and 1, and commits; the
 * second writes x0..x(aborted-1) to partition 0, flushes them (so they are in the log) and aborts. The answer
 * lists each record's [value, partition, offset] as the producer saw them acknowledged.
 */
final class Transactions {
    private Transactions() {}

    static Map<String, Object> produce(Map<String, String> opts) throws Exception {
        Properties p = Clients.base(opts);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, opts.get("txn_id"));
        String topic = opts.get("topic");
        int committed = Integer.parseInt(opts.getOrDefault("committed", "5"));
        int aborted = Integer.parseInt(opts.getOrDefault("aborted", "3"));
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            List<String> values = new ArrayList<>();
            for (int i = 0; i < committed; i++) {
                values.add("c" + i);
                sent.add(producer.send(new ProducerRecord<>(topic, i % 2, null, "c" + i)));
            }
            producer.commitTransaction();
            out.put("committed", acked(values, sent));

            producer.beginTransaction();
            sent.clear();
            values.clear();
            for (int i = 0; i < aborted; i++) {
                values.add("x" + i);
                sent.add(producer.send(new ProducerRecord<>(topic, 0, null, "x" + i)));
            }
            producer.flush();
            out.put("aborted", acked(values, sent));
            producer.abortTransaction();
        }
        return out;
    }

    private static List<List<Object>> acked(List<String> values, List<Future<RecordMetadata>> sent) throws Exception {
        List<List<Object>> out = new ArrayList<>();
        for (int i = 0; i < sent.size(); i++) {
            RecordMetadata m = sent.get(i).get();
            out.add(List.of(values.get(i), m.partition(), m.offset()));
        }
        return out;
    }
}
