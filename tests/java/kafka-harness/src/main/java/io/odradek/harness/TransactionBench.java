package io.odradek.harness;

import java.io.PrintStream;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * {@code txn-bench --bootstrap B --topic T --property bench.transactions=N
 * --property bench.records=R --property bench.size=S [--property bench.mode=plain]
 * [--property K=V]...}: N transactions of R records of S bytes into partition 0 of T, each
 * begun, sent and committed before the next (a transactional.id is set unless the caller
 * gives one); with bench.mode=plain the same records without a transaction, flushed every R
 * records (the idempotent producer's append cost beside it). One warm-up round of
 * max(1, N/10) groups first, not timed. Prints
 * {@code {"groups":N,"records":N*R,"seconds":..}}.
 */
final class TransactionBench {

    private TransactionBench() {
    }

    static void run(Properties props, String topic, PrintStream out) {
        int groups = Integer.parseInt((String) props.remove("bench.transactions"));
        int records = Integer.parseInt((String) props.remove("bench.records"));
        int size = Integer.parseInt((String) props.remove("bench.size"));
        boolean plain = "plain".equals(props.remove("bench.mode"));
        if (!plain) {
            props.putIfAbsent(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "bench-" + topic);
        }
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        byte[] value = new byte[size];
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            if (!plain) {
                producer.initTransactions();
            }
            send(producer, topic, Math.max(1, groups / 10), records, value, plain);
            long started = System.nanoTime();
            send(producer, topic, groups, records, value, plain);
            double seconds = (System.nanoTime() - started) / 1e9;
            out.println("{\"groups\":" + groups + ",\"records\":" + (long) groups * records
                    + ",\"seconds\":" + seconds + "}");
        }
    }

    private static void send(KafkaProducer<byte[], byte[]> producer, String topic, int groups, int records,
                             byte[] value, boolean plain) {
        for (int g = 0; g < groups; g++) {
            if (!plain) {
                producer.beginTransaction();
            }
            for (int r = 0; r < records; r++) {
                producer.send(new ProducerRecord<>(topic, 0, null, value));
            }
            if (plain) {
                producer.flush();
            } else {
                producer.commitTransaction();
            }
        }
    }
}
