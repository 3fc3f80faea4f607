package io.odradek.harness;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Kafka Java client driven by arguments and stdin, printing JSON lines, so Python tests can
 * put records into any Kafka-protocol broker and read them back exactly as a Java client sees
 * them.
 *
 * <pre>
 * create-topic --bootstrap HOST:PORT (--topic T [--partitions N] [--config K=V]...)...
 * produce      --bootstrap HOST:PORT [--topic T] [--property K=V]... (records on stdin)
 * consume      --bootstrap HOST:PORT (--topic T)... [--property K=V]... (to the end offsets)
 * offsets-for-times --bootstrap HOST:PORT (--topic T)... (--timestamp MS)...
 * admin        --bootstrap HOST:PORT [--property K=V]... (steps on stdin)
 * group-consume --bootstrap HOST:PORT --topic T --property group.id=G [--property K=V]...
 *              (a group member until stdin ends; see {@link GroupMember})
 * txn-script   --bootstrap HOST:PORT [--property K=V]... (named producers' steps on stdin;
 *              see {@link TransactionScript})
 * txn-bench    --bootstrap HOST:PORT --topic T --property bench.*=.. (see {@link TransactionBench})
 * wordcount    --bootstrap HOST:PORT --topic INPUT --property wordcount.output=OUTPUT ...
 *              (Kafka Streams WordCount until killed; see {@link WordCount})
 * </pre>
 *
 * produce reads one line per step, fields separated by tabs:
 * {@code record PARTITION TIMESTAMP KEY VALUE [HEADER_NAME HEADER_VALUE]...},
 * {@code flush}, with a transactional.id {@code begin}, {@code commit}, {@code abort},
 * {@code offsets GROUP (TOPIC PARTITION OFFSET)...} (sendOffsetsToTransaction for a consumer
 * group), {@code halt} (the JVM stops at once: the open transaction is left to the broker, as
 * after a crashed producer), and
 * {@code producer TOPIC [K=V]...}, which closes the producer and opens one for TOPIC with these
 * settings over the --property ones (many producers, one JVM).
 * PARTITION and TIMESTAMP are a number or {@code -} (the producer's choice); KEY, VALUE and
 * header values are {@code -} for null or {@code :} followed by base64; header names are text.
 * It prints one {@code {"partition":..,"offset":..,"timestamp":..}} line per record, in input
 * order, after each flush, commit, abort and at the end. abort flushes first, so an aborted
 * transaction's records are in the log, as after a producer that failed mid-transaction.
 *
 * consume prints one line per record of every partition of each --topic (or partition P of
 * them with --partition P) from the start (or --from OFFSET, or --from-timestamp MS: the offset
 * offsetsForTimes finds, the end when none; or --from-end) up to the end offsets taken when
 * it starts: topic, partition, offset, timestamp, timestampType, key, value, headers (bytes
 * base64, null as null). Before them, one {@code {"topic","partition","start"}} line per
 * partition gives the position the seek left the consumer at. The consumer is manually
 * assigned (no group).
 *
 * admin runs Kafka's Admin client, one step a line (tab-separated fields), and prints one JSON
 * line per step: its answer, or {@code {"error": ExceptionClass, "message": ...}}:
 * {@code create-topic T PARTITIONS [K=V]...}, {@code delete-topic T},
 * {@code create-partitions T TOTAL}, {@code list-topics},
 * {@code describe-configs T} (every config: value, source, readOnly, sensitive),
 * {@code alter-configs T [K=V]...} (AlterConfigs: replaces the whole override set),
 * {@code set-configs T [K=V]...} and {@code delete-configs T [K]...} (IncrementalAlterConfigs),
 * {@code delete-records T PARTITION OFFSET} (the new low watermark),
 * {@code describe-cluster}, {@code describe-topic T} (partitions, leaders, topic id),
 * {@code list-offsets T PARTITION SPEC} (SPEC earliest, latest, max-timestamp or a timestamp).
 */
public final class KafkaHarness {

    private KafkaHarness() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            throw new IllegalArgumentException("usage: create-topic|produce|consume --bootstrap B --topic T ...");
        }
        Options options = Options.parse(args);
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        switch (args[0]) {
            case "create-topic" -> createTopic(options, out);
            case "produce" -> produce(options, out);
            case "consume" -> consume(options, out);
            case "offsets-for-times" -> offsetsForTimes(options, out);
            case "admin" -> AdminSteps.run(options.clientProperties(), out);
            case "group-consume" -> GroupMember.run(options.clientProperties(), options.topic, out);
            case "txn-script" -> TransactionScript.run(options.clientProperties(), out);
            case "txn-bench" -> TransactionBench.run(options.clientProperties(), options.topic, out);
            case "wordcount" -> WordCount.run(options.clientProperties(), options.topic, out);
            default -> throw new IllegalArgumentException("unknown command " + args[0]);
        }
        out.flush();
    }

    /** Creates the topic with its configs; waits until the broker answers (it may be starting). */
    private static void createTopic(Options options, PrintStream out) throws Exception {
        Properties props = options.clientProperties();
        props.putIfAbsent(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        try (Admin admin = Admin.create(props)) {
            List<NewTopic> topics = new ArrayList<>();
            for (TopicSpec spec : options.topics) {
                topics.add(new NewTopic(spec.name, spec.partitions, (short) 1).configs(spec.configs));
            }
            for (Map.Entry<String, KafkaFuture<Void>> created : admin.createTopics(topics).values().entrySet()) {
                try {
                    created.getValue().get();
                } catch (ExecutionException error) {
                    if (!(error.getCause() instanceof TopicExistsException)) {
                        throw error;
                    }
                }
                out.println("{\"created\":" + json(created.getKey()) + "}");
            }
        }
    }

    private static void produce(Options options, PrintStream out) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<Future<RecordMetadata>> pending = new ArrayList<>();
        String topic = options.topic;
        KafkaProducer<byte[], byte[]> producer = topic == null ? null : open(options, Map.of());
        try {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                String[] fields = line.split("\t", -1);
                if (fields[0].equals("producer")) {
                    close(producer, pending, out);
                    topic = fields[1];
                    Map<String, String> extra = new HashMap<>();
                    for (int i = 2; i < fields.length; i++) {
                        String[] pair = fields[i].split("=", 2);
                        extra.put(pair[0], pair[1]);
                    }
                    producer = open(options, extra);
                    continue;
                }
                if (producer == null) {
                    throw new IllegalArgumentException("no --topic and no producer step before " + fields[0]);
                }
                switch (fields[0]) {
                    case "record" -> pending.add(producer.send(record(topic, fields)));
                    case "flush" -> {
                        producer.flush();
                        report(pending, out);
                    }
                    case "begin" -> producer.beginTransaction();
                    case "commit" -> {
                        producer.commitTransaction();
                        report(pending, out);
                    }
                    case "abort" -> {
                        producer.flush(); // the aborted records reach the log before the marker
                        producer.abortTransaction();
                        report(pending, out);
                    }
                    case "offsets" -> {
                        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                        for (int i = 2; i + 2 < fields.length; i += 3) {
                            offsets.put(new TopicPartition(fields[i], Integer.parseInt(fields[i + 1])),
                                    new OffsetAndMetadata(Long.parseLong(fields[i + 2])));
                        }
                        producer.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(fields[1]));
                    }
                    case "halt" -> {
                        producer.flush();
                        report(pending, out);
                        Runtime.getRuntime().halt(0);
                    }
                    default -> throw new IllegalArgumentException("unknown step " + fields[0]);
                }
            }
        } finally {
            close(producer, pending, out);
        }
    }

    /** A producer with the command line's --property settings, then {@code extra}. */
    private static KafkaProducer<byte[], byte[]> open(Options options, Map<String, String> extra) {
        Properties props = options.clientProperties();
        props.putAll(extra);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
        if (props.containsKey(ProducerConfig.TRANSACTIONAL_ID_CONFIG)) {
            producer.initTransactions();
        }
        return producer;
    }

    private static void close(KafkaProducer<byte[], byte[]> producer, List<Future<RecordMetadata>> pending,
                              PrintStream out) throws Exception {
        if (producer != null) {
            try {
                producer.flush();
                report(pending, out);
            } finally {
                producer.close();
            }
        }
    }

    private static ProducerRecord<byte[], byte[]> record(String topic, String[] fields) {
        if (fields.length < 5 || fields.length % 2 == 0) {
            throw new IllegalArgumentException("record needs PARTITION TIMESTAMP KEY VALUE [NAME VALUE]...");
        }
        Integer partition = fields[1].equals("-") ? null : Integer.valueOf(fields[1]);
        Long timestamp = fields[2].equals("-") ? null : Long.valueOf(fields[2]);
        List<Header> headers = new ArrayList<>();
        for (int i = 5; i < fields.length; i += 2) {
            headers.add(new RecordHeader(fields[i], bytes(fields[i + 1])));
        }
        return new ProducerRecord<>(topic, partition, timestamp, bytes(fields[3]), bytes(fields[4]), headers);
    }

    /** Prints the metadata of every sent record in send order (failing on the first error). */
    private static void report(List<Future<RecordMetadata>> pending, PrintStream out) throws Exception {
        for (Future<RecordMetadata> future : pending) {
            RecordMetadata metadata = future.get();
            out.println("{\"partition\":" + metadata.partition() + ",\"offset\":" + metadata.offset()
                    + ",\"timestamp\":" + metadata.timestamp() + "}");
        }
        pending.clear();
        out.flush();
    }

    private static void consume(Options options, PrintStream out) {
        Properties props = options.clientProperties();
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.putIfAbsent(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (TopicSpec topic : options.topics) {
                for (PartitionInfo info : consumer.partitionsFor(topic.name, Duration.ofMillis(options.timeoutMs))) {
                    if (options.partition == null || options.partition == info.partition()) {
                        partitions.add(new TopicPartition(info.topic(), info.partition()));
                    }
                }
            }
            consumer.assign(partitions);
            if (options.fromEnd) {
                consumer.seekToEnd(partitions);
            } else if (options.fromTimestamp != null) {
                Map<TopicPartition, Long> query = new HashMap<>();
                partitions.forEach(tp -> query.put(tp, options.fromTimestamp));
                Map<TopicPartition, OffsetAndTimestamp> found =
                        consumer.offsetsForTimes(query, Duration.ofMillis(options.timeoutMs));
                Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
                partitions.forEach(tp -> consumer.seek(tp,
                        found.get(tp) == null ? ends.get(tp) : found.get(tp).offset()));
            } else if (options.from == null) {
                consumer.seekToBeginning(partitions);
            } else {
                partitions.forEach(tp -> consumer.seek(tp, options.from));
            }
            for (TopicPartition tp : partitions) {
                out.println("{\"topic\":" + json(tp.topic()) + ",\"partition\":" + tp.partition()
                        + ",\"start\":" + consumer.position(tp) + "}");
            }
            Map<TopicPartition, Long> end = consumer.endOffsets(partitions);
            long deadline = System.currentTimeMillis() + options.timeoutMs;
            while (!reached(consumer, end)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("did not reach the end offsets " + end + " in " + options.timeoutMs + " ms");
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    out.println(describe(record));
                }
            }
        }
    }

    /** ListOffsets by timestamp: for each partition of each --topic and each --timestamp, the
     *  offset and timestamp of the first record at or after it (offset null when none). */
    private static void offsetsForTimes(Options options, PrintStream out) {
        Properties props = options.clientProperties();
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (TopicSpec topic : options.topics) {
                for (PartitionInfo info : consumer.partitionsFor(topic.name, Duration.ofMillis(options.timeoutMs))) {
                    partitions.add(new TopicPartition(info.topic(), info.partition()));
                }
            }
            for (long target : options.timestamps) {
                Map<TopicPartition, Long> query = new HashMap<>();
                partitions.forEach(tp -> query.put(tp, target));
                Map<TopicPartition, OffsetAndTimestamp> found =
                        consumer.offsetsForTimes(query, Duration.ofMillis(options.timeoutMs));
                for (TopicPartition tp : partitions) {
                    OffsetAndTimestamp answer = found.get(tp);
                    out.println("{\"topic\":" + json(tp.topic()) + ",\"partition\":" + tp.partition()
                            + ",\"target\":" + target
                            + ",\"offset\":" + (answer == null ? "null" : answer.offset())
                            + ",\"timestamp\":" + (answer == null ? "null" : answer.timestamp()) + "}");
                }
            }
        }
    }

    private static boolean reached(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> entry : end.entrySet()) {
            if (consumer.position(entry.getKey()) < entry.getValue()) {
                return false;
            }
        }
        return true;
    }

    private static String describe(ConsumerRecord<byte[], byte[]> record) {
        StringBuilder headers = new StringBuilder("[");
        for (Header header : record.headers()) {
            if (headers.length() > 1) {
                headers.append(',');
            }
            headers.append('[').append(json(header.key())).append(',').append(base64(header.value())).append(']');
        }
        headers.append(']');
        return "{\"topic\":" + json(record.topic()) + ",\"partition\":" + record.partition()
                + ",\"offset\":" + record.offset()
                + ",\"timestamp\":" + record.timestamp() + ",\"timestampType\":" + json(record.timestampType().name)
                + ",\"key\":" + base64(record.key()) + ",\"value\":" + base64(record.value())
                + ",\"headers\":" + headers + "}";
    }

    private static byte[] bytes(String field) {
        if (field.equals("-")) {
            return null;
        }
        if (!field.startsWith(":")) {
            throw new IllegalArgumentException("bytes are - or :BASE64, not " + field);
        }
        return Base64.getDecoder().decode(field.substring(1));
    }

    private static String base64(byte[] data) {
        return data == null ? "null" : "\"" + Base64.getEncoder().encodeToString(data) + "\"";
    }

    static String json(String text) {
        StringBuilder quoted = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> quoted.append("\\\"");
                case '\\' -> quoted.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        quoted.append(String.format("\\u%04x", (int) c));
                    } else {
                        quoted.append(c);
                    }
                }
            }
        }
        return quoted.append('"').toString();
    }

    /** A topic to create: --partitions and --config after a --topic are for that topic. */
    private static final class TopicSpec {
        final String name;
        int partitions = 1;
        final Map<String, String> configs = new HashMap<>();

        TopicSpec(String name) {
            this.name = name;
        }
    }

    /** The command line: --bootstrap, --topic, --partitions, --partition, --from, --timestamp,
     *  --timeout-ms, --config K=V (topic configs) and --property K=V (client configs). */
    private static final class Options {
        String bootstrap;
        String topic;
        final List<TopicSpec> topics = new ArrayList<>();
        Integer partition;
        Long from;
        Long fromTimestamp;
        boolean fromEnd;
        final List<Long> timestamps = new ArrayList<>();
        long timeoutMs = 60000;
        final Properties properties = new Properties();

        static Options parse(String[] args) {
            Options options = new Options();
            for (int i = 1; i < args.length; i += 2) {
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(args[i] + " needs a value");
                }
                String value = args[i + 1];
                switch (args[i]) {
                    case "--bootstrap" -> options.bootstrap = value;
                    case "--topic" -> {
                        options.topic = value;
                        options.topics.add(new TopicSpec(value));
                    }
                    case "--partitions" -> options.lastTopic().partitions = Integer.parseInt(value);
                    case "--partition" -> options.partition = Integer.valueOf(value);
                    case "--from" -> options.from = Long.valueOf(value);
                    case "--from-timestamp" -> options.fromTimestamp = Long.valueOf(value);
                    case "--from-end" -> options.fromEnd = Boolean.parseBoolean(value);
                    case "--timestamp" -> options.timestamps.add(Long.valueOf(value));
                    case "--timeout-ms" -> options.timeoutMs = Long.parseLong(value);
                    case "--config" -> {
                        String[] pair = value.split("=", 2);
                        options.lastTopic().configs.put(pair[0], pair[1]);
                    }
                    case "--property" -> {
                        String[] pair = value.split("=", 2);
                        options.properties.put(pair[0], pair[1]);
                    }
                    default -> throw new IllegalArgumentException("unknown option " + args[i]);
                }
            }
            if (options.bootstrap == null || (options.topic == null && !args[0].equals("produce") && !args[0].equals("admin")
                    && !args[0].equals("txn-script"))) {
                throw new IllegalArgumentException("--bootstrap and --topic are required");
            }
            return options;
        }

        TopicSpec lastTopic() {
            if (topics.isEmpty()) {
                throw new IllegalArgumentException("--partitions and --config follow the --topic they are for");
            }
            return topics.get(topics.size() - 1);
        }

        Properties clientProperties() {
            Properties props = new Properties();
            props.putAll(properties);
            props.put("bootstrap.servers", bootstrap);
            return props;
        }
    }
}
