// Produces each argument after the second as one record to a topic with Kafka's Java client,
// idempotent (its default since 3.0) and acks=all, one at a time, and prints each offset.
// Usage: java -cp kafka-clients.jar:slf4j-api.jar IdempotentProducer.java BOOTSTRAP TOPIC V...
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class IdempotentProducer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        props.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, "100");
        props.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 2; i < args.length; i++) {
                byte[] value = args[i].getBytes(StandardCharsets.UTF_8);
                RecordMetadata sent = producer.send(new ProducerRecord<>(args[1], 0, null, value)).get();
                System.out.println(sent.offset());
            }
        }
    }
}
