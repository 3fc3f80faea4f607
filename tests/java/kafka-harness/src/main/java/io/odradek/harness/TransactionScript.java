package io.odradek.harness;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * {@code txn-script --bootstrap B [--property K=V]...}: several named producers, transactional
 * or not, driven step by step from stdin in one JVM, so a test interleaves transactions, plain
 * records, fencing and timeouts in an exact order and sees what the client saw at each step.
 *
 * <p>One step a line, tab-separated fields; one JSON line printed per step, flushed at once:
 * <ul>
 * <li>{@code open NAME [K=V]...}: a producer with the --property settings and these; with a
 *     transactional.id, initTransactions. {@code {"step":"open","name":..,"error":..}}</li>
 * <li>{@code begin NAME}, {@code commit NAME}, {@code abort NAME}, {@code flush NAME},
 *     {@code close NAME}: {@code {"step":..,"name":..,"error":..}}</li>
 * <li>{@code send NAME TOPIC PARTITION VALUE}: one record (value as text, key null), waited
 *     for: {@code {"step":"send","name":..,"partition":P,"offset":O,"error":..}}</li>
 * <li>{@code send-async NAME TOPIC PARTITION VALUE}: one record, not waited for (its
 *     outcome is not printed): {@code {"step":"send-async","name":..}}</li>
 * <li>{@code end-offsets TOPIC ISOLATION}: a consumer's endOffsets with isolation.level
 *     ISOLATION (read_committed: the last stable offset), once they hold still (the same
 *     answer twice, 200 ms apart, 10 s at most: a transaction's markers are written after
 *     EndTxn is answered, on Kafka too), one line per partition:
 *     {@code {"step":"end-offsets","topic":..,"partition":P,"offset":O}}</li>
 * <li>{@code await-stable TOPIC MS}: until no partition of TOPIC has an open transaction
 *     (endOffsets under read_committed equal those under read_uncommitted), MS at most;
 *     then as end-offsets under read_committed</li>
 * <li>{@code await-ended NAME MS}: until the coordinator says the last transaction of NAME's
 *     transactional.id ended (CompleteCommit, CompleteAbort or Empty: its markers are
 *     written), MS at most: EndTxn is answered before the markers are written, on Kafka too,
 *     so a record sent next may land before or after them.
 *     {@code {"step":"await-ended","name":..,"error":..}}</li>
 * <li>{@code sleep MS}: {@code {"step":"sleep"}}</li>
 * </ul>
 * error is null, or the simple name of the exception the client threw (the cause's, for an
 * ExecutionException or a KafkaException wrapping one), followed by ": " and its message.
 */
final class TransactionScript {

    private TransactionScript() {
    }

    static void run(Properties base, PrintStream out) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Map<String, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();
        Map<String, String> transactionalIds = new HashMap<>();
        try {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) {
                    continue;
                }
                String[] f = line.split("\t", -1);
                String step = f[0];
                switch (step) {
                    case "open" -> {
                        Properties props = new Properties();
                        props.putAll(base);
                        for (int i = 2; i < f.length; i++) {
                            String[] pair = f[i].split("=", 2);
                            props.put(pair[0], pair[1]);
                        }
                        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
                        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
                        String error = null;
                        try {
                            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
                            producers.put(f[1], producer);
                            if (props.containsKey(ProducerConfig.TRANSACTIONAL_ID_CONFIG)) {
                                transactionalIds.put(f[1], props.getProperty(ProducerConfig.TRANSACTIONAL_ID_CONFIG));
                                producer.initTransactions();
                            }
                        } catch (Exception e) {
                            error = describe(e);
                        }
                        print(out, step, f[1], error, "");
                    }
                    case "begin", "commit", "abort", "flush", "close" -> {
                        KafkaProducer<byte[], byte[]> producer = producers.get(f[1]);
                        String error = null;
                        try {
                            switch (step) {
                                case "begin" -> producer.beginTransaction();
                                case "commit" -> producer.commitTransaction();
                                case "abort" -> producer.abortTransaction();
                                case "flush" -> producer.flush();
                                default -> {
                                    producers.remove(f[1]);
                                    producer.close(Duration.ofSeconds(10));
                                }
                            }
                        } catch (Exception e) {
                            error = describe(e);
                        }
                        print(out, step, f[1], error, "");
                    }
                    case "send" -> {
                        KafkaProducer<byte[], byte[]> producer = producers.get(f[1]);
                        String error = null;
                        String where = "";
                        try {
                            RecordMetadata metadata = producer.send(record(f)).get();
                            where = ",\"partition\":" + metadata.partition() + ",\"offset\":" + metadata.offset();
                        } catch (Exception e) {
                            error = describe(e);
                        }
                        print(out, step, f[1], error, where);
                    }
                    case "send-async" -> {
                        String error = null;
                        try {
                            producers.get(f[1]).send(record(f));
                        } catch (Exception e) {
                            error = describe(e);
                        }
                        print(out, step, f[1], error, "");
                    }
                    case "end-offsets" -> endOffsets(base, f[1], f[2], out);
                    case "await-stable" -> {
                        awaitStable(base, f[1], Long.parseLong(f[2]));
                        endOffsets(base, f[1], "read_committed", out);
                    }
                    case "await-ended" -> {
                        String error = null;
                        try {
                            awaitEnded(base, transactionalIds.get(f[1]), Long.parseLong(f[2]));
                        } catch (Exception e) {
                            error = describe(e);
                        }
                        print(out, step, f[1], error, "");
                    }
                    case "sleep" -> {
                        Thread.sleep(Long.parseLong(f[1]));
                        print(out, step, "", null, "");
                    }
                    default -> throw new IllegalArgumentException("unknown step " + step);
                }
            }
        } finally {
            for (KafkaProducer<byte[], byte[]> producer : producers.values()) {
                producer.close(Duration.ofSeconds(10));
            }
        }
    }

    private static ProducerRecord<byte[], byte[]> record(String[] f) {
        Integer partition = f[3].equals("-") ? null : Integer.valueOf(f[3]);
        return new ProducerRecord<>(f[2], partition, null, f[4].getBytes(StandardCharsets.UTF_8));
    }

    private static void endOffsets(Properties base, String topic, String isolation, PrintStream out) {
        Properties props = new Properties();
        props.putAll(base);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(60))) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            partitions.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions, Duration.ofSeconds(60));
            long deadline = System.currentTimeMillis() + 10000;
            while (System.currentTimeMillis() < deadline) {
                sleep(200);
                Map<TopicPartition, Long> again = consumer.endOffsets(partitions, Duration.ofSeconds(60));
                if (again.equals(ends)) {
                    break;
                }
                ends = again;
            }
            for (TopicPartition tp : partitions) {
                out.println("{\"step\":\"end-offsets\",\"topic\":" + KafkaHarness.json(topic)
                        + ",\"partition\":" + tp.partition() + ",\"isolation\":" + KafkaHarness.json(isolation)
                        + ",\"offset\":" + ends.get(tp) + "}");
            }
            out.flush();
        }
    }

    private static void awaitStable(Properties base, String topic, long millis) {
        Map<String, KafkaConsumer<byte[], byte[]>> consumers = new HashMap<>();
        try {
            for (String isolation : List.of("read_committed", "read_uncommitted")) {
                Properties props = new Properties();
                props.putAll(base);
                props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
                props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
                props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
                consumers.put(isolation, new KafkaConsumer<>(props));
            }
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumers.get("read_committed").partitionsFor(topic, Duration.ofSeconds(60))) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            long deadline = System.currentTimeMillis() + millis;
            while (!consumers.get("read_committed").endOffsets(partitions, Duration.ofSeconds(60))
                    .equals(consumers.get("read_uncommitted").endOffsets(partitions, Duration.ofSeconds(60)))
                    && System.currentTimeMillis() < deadline) {
                sleep(200);
            }
        } finally {
            consumers.values().forEach(KafkaConsumer::close);
        }
    }

    private static void awaitEnded(Properties base, String transactionalId, long millis) throws Exception {
        List<TransactionState> ended = List.of(
            TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT, TransactionState.EMPTY);
        try (Admin admin = Admin.create(base)) {
            long deadline = System.currentTimeMillis() + millis;
            while (true) {
                TransactionState state = admin.describeTransactions(List.of(transactionalId))
                    .description(transactionalId).get().state();
                if (ended.contains(state)) {
                    return;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException(transactionalId + " still " + state + " after " + millis + " ms");
                }
                sleep(50);
            }
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private static void print(PrintStream out, String step, String name, String error, String extra) {
        out.println("{\"step\":" + KafkaHarness.json(step) + ",\"name\":" + KafkaHarness.json(name)
                + extra + ",\"error\":" + (error == null ? "null" : KafkaHarness.json(error)) + "}");
        out.flush();
    }

    /** The exception as a client's user sees it: its class, unwrapped from ExecutionException. */
    static String describe(Throwable error) {
        Throwable shown = error;
        if (shown instanceof ExecutionException && shown.getCause() != null) {
            shown = shown.getCause();
        }
        return shown.getClass().getSimpleName() + ": " + shown.getMessage();
    }
}
