package io.odradek.harness;

import static io.odradek.harness.KafkaHarness.json;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Kafka's Admin client driven one step a line from stdin (KafkaHarness's class comment lists the
 * steps); one JSON line per step, so a test sees what a Java admin tool sees, errors included.
 */
final class AdminSteps {

    private AdminSteps() {
    }

    static void run(Properties props, PrintStream out) throws Exception {
        props.putIfAbsent(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        props.putIfAbsent(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (Admin admin = Admin.create(props)) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                String[] fields = line.split("\t", -1);
                try {
                    out.println(step(admin, fields));
                } catch (ExecutionException error) {
                    Throwable cause = error.getCause();
                    out.println("{\"step\":" + json(fields[0]) + ",\"error\":" + json(cause.getClass().getSimpleName())
                            + ",\"message\":" + json(String.valueOf(cause.getMessage())) + "}");
                }
                out.flush();
            }
        }
    }

    private static String step(Admin admin, String[] fields) throws Exception {
        String name = fields[0];
        return switch (name) {
            case "create-topic" -> {
                NewTopic topic = new NewTopic(fields[1], Integer.parseInt(fields[2]), (short) 1)
                        .configs(pairs(fields, 3));
                admin.createTopics(List.of(topic)).all().get();
                yield "{\"step\":\"create-topic\",\"topic\":" + json(fields[1]) + "}";
            }
            case "delete-topic" -> {
                admin.deleteTopics(List.of(fields[1])).all().get();
                yield "{\"step\":\"delete-topic\",\"topic\":" + json(fields[1]) + "}";
            }
            case "create-partitions" -> {
                admin.createPartitions(Map.of(fields[1], NewPartitions.increaseTo(Integer.parseInt(fields[2]))))
                        .all().get();
                yield "{\"step\":\"create-partitions\",\"topic\":" + json(fields[1]) + "}";
            }
            case "list-topics" -> {
                List<String> names = new ArrayList<>(admin.listTopics().names().get());
                names.sort(null);
                yield "{\"step\":\"list-topics\",\"topics\":" + strings(names) + "}";
            }
            case "describe-topic" -> {
                TopicDescription description = admin.describeTopics(List.of(fields[1])).allTopicNames().get()
                        .get(fields[1]);
                StringBuilder partitions = new StringBuilder("[");
                for (TopicPartitionInfo info : description.partitions()) {
                    if (partitions.length() > 1) {
                        partitions.append(',');
                    }
                    partitions.append("{\"partition\":").append(info.partition()).append(",\"leader\":")
                            .append(info.leader() == null ? "null" : info.leader().id()).append(",\"replicas\":")
                            .append(info.replicas().size()).append(",\"isr\":").append(info.isr().size()).append('}');
                }
                yield "{\"step\":\"describe-topic\",\"topic\":" + json(fields[1]) + ",\"topicId\":"
                        + json(description.topicId().toString()) + ",\"internal\":" + description.isInternal()
                        + ",\"partitions\":" + partitions + "]}";
            }
            case "describe-configs" -> {
                ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, fields[1]);
                Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
                StringBuilder entries = new StringBuilder("{");
                Map<String, ConfigEntry> sorted = new TreeMap<>();
                config.entries().forEach(entry -> sorted.put(entry.name(), entry));
                for (ConfigEntry entry : sorted.values()) {
                    if (entries.length() > 1) {
                        entries.append(',');
                    }
                    entries.append(json(entry.name())).append(":{\"value\":")
                            .append(entry.value() == null ? "null" : json(entry.value()))
                            .append(",\"source\":").append(json(entry.source().name()))
                            .append(",\"readOnly\":").append(entry.isReadOnly())
                            .append(",\"sensitive\":").append(entry.isSensitive()).append('}');
                }
                yield "{\"step\":\"describe-configs\",\"topic\":" + json(fields[1]) + ",\"configs\":" + entries + "}}";
            }
            case "set-configs", "delete-configs" -> {
                ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, fields[1]);
                List<AlterConfigOp> ops = new ArrayList<>();
                for (int i = 2; i < fields.length; i++) {
                    String[] pair = fields[i].split("=", 2);
                    ops.add(name.equals("set-configs")
                            ? new AlterConfigOp(new ConfigEntry(pair[0], pair[1]), AlterConfigOp.OpType.SET)
                            : new AlterConfigOp(new ConfigEntry(pair[0], null), AlterConfigOp.OpType.DELETE));
                }
                admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
                yield "{\"step\":" + json(name) + ",\"topic\":" + json(fields[1]) + "}";
            }
            case "delete-records" -> {
                TopicPartition tp = new TopicPartition(fields[1], Integer.parseInt(fields[2]));
                long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(Long.parseLong(fields[3]))))
                        .lowWatermarks().get(tp).get().lowWatermark();
                yield "{\"step\":\"delete-records\",\"lowWatermark\":" + low + "}";
            }
            case "describe-cluster" -> {
                DescribeClusterResult cluster = admin.describeCluster();
                StringBuilder nodes = new StringBuilder("[");
                for (Node node : cluster.nodes().get()) {
                    if (nodes.length() > 1) {
                        nodes.append(',');
                    }
                    nodes.append("{\"id\":").append(node.id()).append(",\"host\":").append(json(node.host()))
                            .append(",\"port\":").append(node.port()).append('}');
                }
                Node controller = cluster.controller().get();
                yield "{\"step\":\"describe-cluster\",\"clusterId\":" + json(String.valueOf(cluster.clusterId().get()))
                        + ",\"controller\":" + (controller == null ? "null" : controller.id())
                        + ",\"nodes\":" + nodes + "]}";
            }
            case "list-offsets" -> {
                TopicPartition tp = new TopicPartition(fields[1], Integer.parseInt(fields[2]));
                OffsetSpec spec = switch (fields[3]) {
                    case "earliest" -> OffsetSpec.earliest();
                    case "latest" -> OffsetSpec.latest();
                    case "max-timestamp" -> OffsetSpec.maxTimestamp();
                    default -> OffsetSpec.forTimestamp(Long.parseLong(fields[3]));
                };
                ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
                yield "{\"step\":\"list-offsets\",\"offset\":" + info.offset() + ",\"timestamp\":" + info.timestamp()
                        + "}";
            }
            default -> throw new IllegalArgumentException("unknown admin step " + name);
        };
    }

    private static Map<String, String> pairs(String[] fields, int from) {
        Map<String, String> pairs = new TreeMap<>();
        for (int i = from; i < fields.length; i++) {
            String[] pair = fields[i].split("=", 2);
            pairs.put(pair[0], pair[1]);
        }
        return pairs;
    }

    private static String strings(List<String> names) {
        StringBuilder list = new StringBuilder("[");
        for (String name : names) {
            if (list.length() > 1) {
                list.append(',');
            }
            list.append(json(name));
        }
        return list.append(']').toString();
    }
}
