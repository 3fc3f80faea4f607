package io.odradek.harness;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * {@code group-consume --bootstrap B --topic T [--property K=V]...}: a consumer subscribed to T
 * in the group its {@code group.id} property names, committing synchronously after every poll
 * that returned records, until its stdin ends; then it closes (leaving the group).
 *
 * <p>It prints one JSON line per event, flushed at once, so a test follows it while it runs:
 * {@code {"assigned":[P...],"at":MS}}, {@code {"revoked":[P...],"at":MS}} and
 * {@code {"lost":[P...],"at":MS}} from its rebalance listener (MS: the wall clock when called),
 * {@code {"records":[[P,OFFSET]...]}} for each poll that returned records,
 * {@code {"commitFailed":"Exception"}} when a commit met a rebalance, and
 * {@code {"closed":true}} at the end.
 */
final class GroupMember {

    private GroupMember() {
    }

    static void run(Properties props, String topic, PrintStream out) throws InterruptedException {
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.putIfAbsent(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.putIfAbsent(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            Thread stdin = new Thread(() -> {
                drain(System.in);
                consumer.wakeup();
            }, "stdin-watch");
            stdin.setDaemon(true);
            stdin.start();
            consumer.subscribe(List.of(topic), new Listener(out));
            try {
                while (stdin.isAlive()) {
                    ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                    if (records.isEmpty()) {
                        continue;
                    }
                    List<String> positions = new ArrayList<>();
                    for (ConsumerRecord<byte[], byte[]> record : records) {
                        positions.add("[" + record.partition() + "," + record.offset() + "]");
                    }
                    emit(out, "{\"records\":[" + String.join(",", positions) + "]}");
                    try {
                        consumer.commitSync();
                    } catch (CommitFailedException | RebalanceInProgressException | RetriableException failure) {
                        emit(out, "{\"commitFailed\":" + KafkaHarness.json(failure.getClass().getSimpleName()) + "}");
                    }
                }
            } catch (WakeupException stopping) {
                // stdin ended while polling or committing: close below
            }
        }
        emit(out, "{\"closed\":true}");
    }

    private static void drain(InputStream in) {
        byte[] buffer = new byte[256];
        try {
            while (in.read(buffer) >= 0) {
                // only the end of stdin matters
            }
        } catch (IOException ended) {
            // a closed stdin ends the member as its end does
        }
    }

    private static void emit(PrintStream out, String line) {
        synchronized (out) {
            out.println(line);
            out.flush();
        }
    }

    private static String partitions(Collection<TopicPartition> partitions) {
        List<String> numbers = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            numbers.add(Integer.toString(tp.partition()));
        }
        return "[" + String.join(",", numbers) + "]";
    }

    /** Reports what the group gives and takes, as the test checks ownership with it. */
    private record Listener(PrintStream out) implements ConsumerRebalanceListener {

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            emit(out, "{\"revoked\":" + partitions(partitions) + ",\"at\":" + System.currentTimeMillis() + "}");
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            emit(out, "{\"assigned\":" + partitions(partitions) + ",\"at\":" + System.currentTimeMillis() + "}");
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            emit(out, "{\"lost\":" + partitions(partitions) + ",\"at\":" + System.currentTimeMillis() + "}");
        }
    }
}
