package io.odradek.harness;

import java.io.PrintStream;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * {@code wordcount --bootstrap B --topic INPUT --property wordcount.output=OUTPUT
 * --property application.id=APP --property state.dir=DIR [--property K=V]...}: Kafka Streams'
 * WordCount (lines of INPUT split into lower-case words, counted per word, each new count sent
 * to OUTPUT as word -> 8-byte long) with every other --property as a Streams setting
 * (processing.guarantee=exactly_once_v2 by the caller). The record cache is off, so every
 * input word gives one output record. It runs until it is killed, printing
 * {@code {"state":STATE}} at each state change and {@code {"error":..}} if a thread dies.
 */
final class WordCount {

    private WordCount() {
    }

    static void run(Properties props, String input, PrintStream out) throws InterruptedException {
        String output = (String) props.remove("wordcount.output");
        if (output == null) {
            throw new IllegalArgumentException("wordcount needs --property wordcount.output=TOPIC");
        }
        props.putIfAbsent(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        props.putIfAbsent(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.as("word-counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            synchronized (out) {
                out.println("{\"state\":" + KafkaHarness.json(now.name()) + "}");
                out.flush();
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(error -> {
            synchronized (out) {
                out.println("{\"error\":" + KafkaHarness.json(TransactionScript.describe(error)) + "}");
                out.flush();
            }
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        streams.start();
        done.await();
    }
}
