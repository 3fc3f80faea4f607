// Prints Kafka's protocol error table, one "CODE NAME" line per entry of
// org.apache.kafka.common.protocol.Errors, so a test can compare odradek's table with it.
// Usage: java -cp kafka-clients.jar ErrorCodes.java
import org.apache.kafka.common.protocol.Errors;

public class ErrorCodes {
    public static void main(String[] args) {
        for (Errors error : Errors.values()) {
            System.out.println(error.code() + " " + error.name());
        }
    }
}
