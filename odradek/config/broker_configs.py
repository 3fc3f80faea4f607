"""The broker-level keys (Kafka's ``KafkaConfig``/``ServerLogConfigs`` subset odradek supports).

``log.*`` keys are the broker defaults of topic keys; ``TOPIC_CONFIG_SYNONYMS`` says which, in
Kafka's precedence order (``log.roll.ms`` before ``log.roll.hours``).
"""

from __future__ import annotations

from dataclasses import replace
from sys import float_info

from odradek.config.config_def import ConfigDef
from odradek.config.config_key import ConfigKey
from odradek.config.config_synonym import HOUR_MS, MINUTE_MS, ConfigSynonym
from odradek.config.config_type import ConfigType
from odradek.config.importance import Importance
from odradek.config.topic_configs import MIN_SEGMENT_BYTES, TOPIC_CONFIG_DEF
from odradek.config.validator import Validator
from odradek.int_limits import INT64_MAX

INT, LONG, DOUBLE = ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE
BOOLEAN, STRING, LIST = ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.LIST
PASSWORD = ConfigType.PASSWORD
HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW

MIB = 1024 * 1024
PORT = Validator.between(0, 65535)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
# Kafka's default is Integer.MAX_VALUE; every connection costs a file descriptor and buffers,
# so a cap a default `ulimit -n` can hold keeps a flood of clients from exhausting the process.
DEFAULT_MAX_CONNECTIONS = 10000
# Kafka's default is -1 (unbounded); a bound keeps many half-sent requests from exhausting
# the process. Five requests of the largest size socket.request.max.bytes allows by default.
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 512 * MIB
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
STANDARD_AUTHORIZERS = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)

TOPIC_CONFIG_SYNONYMS: dict[str, tuple[ConfigSynonym, ...]] = {
    "segment.bytes": (ConfigSynonym("log.segment.bytes"),),
    "segment.ms": (ConfigSynonym("log.roll.ms"), ConfigSynonym("log.roll.hours", HOUR_MS)),
    "segment.jitter.ms": (
        ConfigSynonym("log.roll.jitter.ms"),
        ConfigSynonym("log.roll.jitter.hours", HOUR_MS),
    ),
    "segment.index.bytes": (ConfigSynonym("log.index.size.max.bytes"),),
    "index.interval.bytes": (ConfigSynonym("log.index.interval.bytes"),),
    "retention.ms": (
        ConfigSynonym("log.retention.ms"),
        ConfigSynonym("log.retention.minutes", MINUTE_MS),
        ConfigSynonym("log.retention.hours", HOUR_MS),
    ),
    "retention.bytes": (ConfigSynonym("log.retention.bytes"),),
    "cleanup.policy": (ConfigSynonym("log.cleanup.policy"),),
    "max.message.bytes": (ConfigSynonym("message.max.bytes"),),
    "message.decompression.max.ratio": (ConfigSynonym("log.message.decompression.max.ratio"),),
    "message.timestamp.type": (ConfigSynonym("log.message.timestamp.type"),),
    "message.timestamp.before.max.ms": (ConfigSynonym("log.message.timestamp.before.max.ms"),),
    "message.timestamp.after.max.ms": (ConfigSynonym("log.message.timestamp.after.max.ms"),),
    "flush.messages": (ConfigSynonym("log.flush.interval.messages"),),
    "flush.ms": (
        ConfigSynonym("log.flush.interval.ms"),
        ConfigSynonym("log.flush.scheduler.interval.ms"),
    ),
    "file.delete.delay.ms": (ConfigSynonym("log.segment.delete.delay.ms"),),
    "preallocate": (ConfigSynonym("log.preallocate"),),
    "delete.retention.ms": (ConfigSynonym("log.cleaner.delete.retention.ms"),),
    "min.compaction.lag.ms": (ConfigSynonym("log.cleaner.min.compaction.lag.ms"),),
    "max.compaction.lag.ms": (ConfigSynonym("log.cleaner.max.compaction.lag.ms"),),
    "min.cleanable.dirty.ratio": (ConfigSynonym("log.cleaner.min.cleanable.ratio"),),
    "compression.type": (ConfigSynonym("compression.type"),),
}


def _default_of(topic_name: str, name: str, importance: Importance) -> ConfigKey:
    """Broker key ``name``: the default of topic key ``topic_name``, same type and rules."""
    topic_key = TOPIC_CONFIG_DEF[topic_name]
    doc = f"{topic_key.doc} Default of topic key {topic_name}."
    return replace(topic_key, name=name, importance=importance, doc=doc)


def _millis_of(topic_name: str, name: str, coarser: str) -> ConfigKey:
    """Broker key ``name``: ``topic_name`` in ms, unset by default, preferred over ``coarser``."""
    doc = f"Default of topic key {topic_name}; when set, takes precedence over {coarser}."
    return replace(TOPIC_CONFIG_DEF[topic_name], name=name, default=None, importance=HIGH, doc=doc)


BROKER_CONFIG_DEF = ConfigDef(
    [
        ConfigKey("broker.id", INT, 0, HIGH,
                  "Identity of this broker, written to meta.properties in every log directory.",
                  Validator.at_least(0)),
        ConfigKey("cluster.id", STRING, None, LOW,
                  "Identity of the cluster; generated at first start when unset, then kept in "
                  "meta.properties.",
                  Validator.matching("[A-Za-z0-9_-]+")),
        ConfigKey("host", STRING, "127.0.0.1", HIGH,
                  "Address the listener binds to, when listeners is not set."),
        ConfigKey("port", INT, 9092, HIGH,
                  "Port of the listener, when listeners is not set; 0 picks a free one.", PORT),
        ConfigKey("listeners", LIST, None, HIGH,
                  "The listeners as NAME://host:port, each with the security protocol "
                  "listener.security.protocol.map gives NAME (PLAINTEXT, SSL, SASL_PLAINTEXT, "
                  "SASL_SSL); each serves both Kafka's protocol and odradek's. Unset: "
                  "PLAINTEXT://host:port from host and port. An empty host binds every "
                  "interface."),
        ConfigKey("advertised.listeners", LIST, None, HIGH,
                  "Where clients reach the listener, as NAME://host:port, returned by Metadata "
                  "(e.g. PLAINTEXT://localhost:9092 for a broker bound to 0.0.0.0 in a "
                  "container). Unset: the listener itself; port 0 means the bound port."),
        ConfigKey("listener.security.protocol.map", LIST,
                  ("PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT",
                   "SASL_SSL:SASL_SSL"), MEDIUM,
                  "Security protocol of each listener name, as NAME:PROTOCOL."),
        ConfigKey("ssl.keystore.type", STRING, "PEM", HIGH,
                  "Format of the broker's key and certificate chain: PEM only (Kafka's JKS and "
                  "PKCS12 keystores can be converted with openssl).", Validator.one_of("PEM")),
        ConfigKey("ssl.keystore.location", STRING, None, HIGH,
                  "PEM file holding the private key and certificate chain TLS listeners present "
                  "(or use ssl.keystore.key and ssl.keystore.certificate.chain)."),
        ConfigKey("ssl.keystore.key", PASSWORD, None, HIGH,
                  "The private key in PEM, inline, with ssl.keystore.certificate.chain."),
        ConfigKey("ssl.keystore.certificate.chain", STRING, None, HIGH,
                  "The certificate chain in PEM, inline, with ssl.keystore.key."),
        ConfigKey("ssl.key.password", PASSWORD, None, HIGH,
                  "Password of an encrypted private key."),
        ConfigKey("ssl.truststore.type", STRING, "PEM", MEDIUM,
                  "Format of the trusted certificates: PEM only.", Validator.one_of("PEM")),
        ConfigKey("ssl.truststore.location", STRING, None, HIGH,
                  "PEM file of the certificate authorities trusted to sign client certificates "
                  "(mutual TLS)."),
        ConfigKey("ssl.truststore.certificates", STRING, None, HIGH,
                  "The trusted certificates in PEM, inline (instead of ssl.truststore.location)."),
        ConfigKey("ssl.client.auth", STRING, "none", MEDIUM,
                  "Whether TLS listeners ask clients for a certificate: none, requested (checked "
                  "when given) or required. A verified certificate's subject is the principal "
                  "on an SSL listener.", Validator.one_of("none", "requested", "required")),
        ConfigKey("ssl.enabled.protocols", LIST, TLS_PROTOCOLS, MEDIUM,
                  "TLS versions TLS listeners accept.", Validator.one_of(*TLS_PROTOCOLS)),
        ConfigKey("ssl.cipher.suites", LIST, None, LOW,
                  "TLS 1.2 cipher suites TLS listeners accept, in OpenSSL's names; unset: the "
                  "ssl module's defaults. TLS 1.3 suites are not configurable."),
        ConfigKey("ssl.handshake.timeout.ms", LONG, 10000, LOW,
                  "Time a client has to finish the TLS handshake before it is disconnected.",
                  Validator.at_least(1)),
        ConfigKey("sasl.enabled.mechanisms", LIST, SASL_MECHANISMS, MEDIUM,
                  "SASL mechanisms SASL listeners offer. SCRAM users are managed with "
                  "`odradek users` or AlterUserScramCredentials; PLAIN checks the password "
                  "against the same salted credentials.", Validator.one_of(*SASL_MECHANISMS)),
        ConfigKey("sasl.server.max.receive.size", INT, 524288, LOW,
                  "Largest request a SASL listener reads before the client has authenticated.",
                  Validator.at_least(1)),
        ConfigKey("sasl.server.authentication.timeout.ms", LONG, 30000, LOW,
                  "Time a client on a SASL listener has to authenticate from connecting before "
                  "it is disconnected.", Validator.at_least(1)),
        ConfigKey("connection.failed.authentication.delay.ms", INT, 100, LOW,
                  "Delay of the answer to a failed SASL authentication (the connection closes "
                  "after it), which slows password guessing.", Validator.at_least(0)),
        ConfigKey("authorizer.class.name", STRING, None, HIGH,
                  "Unset: every principal may do everything. Kafka's StandardAuthorizer (or "
                  "AclAuthorizer) class name: requests are checked against the ACLs kept in the "
                  "log directory.", Validator.one_of(*STANDARD_AUTHORIZERS)),
        ConfigKey("super.users", STRING, None, HIGH,
                  "Principals allowed everything whatever the ACLs, separated by semicolons "
                  "(User:admin;User:CN=ops,O=example)."),
        ConfigKey("allow.everyone.if.no.acl.found", BOOLEAN, False, HIGH,
                  "Allow an operation on a resource no ACL matches (with an authorizer set)."),
        ConfigKey("quota.window.num", INT, 11, LOW,
                  "Samples a client quota's rate is measured over (the current one included).",
                  Validator.at_least(1)),
        ConfigKey("quota.window.size.seconds", INT, 1, LOW,
                  "Length of one client quota sample.", Validator.at_least(1)),
        ConfigKey("metrics.host", STRING, "127.0.0.1", MEDIUM,
                  "Address the Prometheus metrics endpoint binds to."),
        ConfigKey("metrics.port", INT, 9644, MEDIUM,
                  "Port of the Prometheus metrics endpoint; 0 picks a free one.", PORT),
        ConfigKey("log.dirs", LIST, None, HIGH,
                  "Directories partitions are stored in; when unset, log.dir is used."),
        ConfigKey("log.dir", STRING, "/tmp/odradek-logs", HIGH,
                  "The single log directory used when log.dirs is unset."),
        _default_of("segment.bytes", "log.segment.bytes", HIGH),
        _millis_of("segment.ms", "log.roll.ms", "log.roll.hours"),
        ConfigKey("log.roll.hours", INT, 168, HIGH,
                  "Default of topic key segment.ms, in hours.", Validator.at_least(1)),
        _millis_of("segment.jitter.ms", "log.roll.jitter.ms", "log.roll.jitter.hours"),
        ConfigKey("log.roll.jitter.hours", INT, 0, HIGH,
                  "Default of topic key segment.jitter.ms, in hours.", Validator.at_least(0)),
        _default_of("segment.index.bytes", "log.index.size.max.bytes", MEDIUM),
        _default_of("index.interval.bytes", "log.index.interval.bytes", MEDIUM),
        _millis_of("retention.ms", "log.retention.ms", "log.retention.minutes"),
        ConfigKey("log.retention.minutes", INT, None, HIGH,
                  "Default of topic key retention.ms, in minutes; when set, takes precedence "
                  "over log.retention.hours.", Validator.at_least(-1)),
        ConfigKey("log.retention.hours", INT, 168, HIGH,
                  "Default of topic key retention.ms, in hours; -1 keeps data forever.",
                  Validator.at_least(-1)),
        _default_of("retention.bytes", "log.retention.bytes", HIGH),
        ConfigKey("log.retention.check.interval.ms", LONG, 300000, MEDIUM,
                  "How often the broker looks for segments to delete under retention.",
                  Validator.at_least(1)),
        ConfigKey("log.initial.task.delay.ms", LONG, 30000, LOW,
                  "How long after start-up the periodic log tasks (retention, flushes, "
                  "checkpoints, producer expiration) first run; for tests, as in Kafka.",
                  Validator.at_least(0)),
        _default_of("cleanup.policy", "log.cleanup.policy", MEDIUM),
        _default_of("message.timestamp.type", "log.message.timestamp.type", MEDIUM),
        _default_of("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms",
                    MEDIUM),
        _default_of("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms",
                    MEDIUM),
        _default_of("max.message.bytes", "message.max.bytes", HIGH),
        _default_of("message.decompression.max.ratio", "log.message.decompression.max.ratio",
                    MEDIUM),
        _default_of("compression.type", "compression.type", HIGH),
        _default_of("flush.messages", "log.flush.interval.messages", HIGH),
        _millis_of("flush.ms", "log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
        ConfigKey("log.flush.scheduler.interval.ms", LONG, INT64_MAX, HIGH,
                  "How often the flusher checks which logs are due a flush; also the default of "
                  "topic key flush.ms when log.flush.interval.ms is unset.",
                  Validator.at_least(1)),
        ConfigKey("log.flush.commit.linger.ms", INT, 2, MEDIUM,
                  "Longest an acks=all fsync is held back after the last one for the "
                  "requests expected to share it (as many as the last one answered or saw "
                  "arrive); 0 starts every fsync at once. See docs/durability.md.",
                  Validator.between(0, 1000)),
        ConfigKey("log.flush.offset.checkpoint.interval.ms", INT, 60000, HIGH,
                  "How often the recovery points are written to recovery-point-offset-checkpoint.",
                  Validator.at_least(1)),
        ConfigKey("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, HIGH,
                  "How often the log start offsets are written to log-start-offset-checkpoint.",
                  Validator.at_least(1)),
        ConfigKey("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, HIGH,
                  "How often the high watermarks are written to replication-offset-checkpoint.",
                  Validator.at_least(1)),
        _default_of("file.delete.delay.ms", "log.segment.delete.delay.ms", HIGH),
        _default_of("preallocate", "log.preallocate", MEDIUM),
        ConfigKey("producer.id.expiration.ms", INT, 86400000, LOW,
                  "How long a partition remembers an idempotent producer that writes nothing; "
                  "after that its retries are no longer recognised as duplicates.",
                  Validator.at_least(1)),
        ConfigKey("producer.id.expiration.check.interval.ms", INT, 600000, LOW,
                  "How often partitions forget producers idle for producer.id.expiration.ms.",
                  Validator.at_least(1)),
        ConfigKey("log.cleaner.enable", BOOLEAN, True, MEDIUM,
                  "Run the log cleaner, which compacts topics whose cleanup.policy has compact."),
        ConfigKey("log.cleaner.threads", INT, 1, MEDIUM,
                  "Number of logs the cleaner compacts at the same time.",
                  Validator.at_least(0)),
        ConfigKey("log.cleaner.dedupe.buffer.size", LONG, 128 * MIB, MEDIUM,
                  "Memory shared by the cleaner threads for their key-to-offset maps; at least "
                  "1 MiB per thread.",
                  Validator.at_least(0)),
        ConfigKey("log.cleaner.io.buffer.size", INT, 512 * 1024, MEDIUM,
                  "Memory shared by the cleaner threads for their read and write buffers.",
                  Validator.at_least(1)),
        ConfigKey("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, MEDIUM,
                  "How full the cleaner's key-to-offset map may get; fuller maps hold more keys "
                  "but collide more.",
                  Validator.above(0, 1)),
        ConfigKey("log.cleaner.io.max.bytes.per.second", DOUBLE, float_info.max, MEDIUM,
                  "Read plus write rate the cleaner is throttled to, so it does not starve "
                  "producers and consumers of disk.",
                  Validator.above(0)),
        ConfigKey("log.cleaner.backoff.ms", LONG, 15000, MEDIUM,
                  "How long the cleaner sleeps when no log needs cleaning.",
                  Validator.at_least(0)),
        _default_of("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", MEDIUM),
        _default_of("delete.retention.ms", "log.cleaner.delete.retention.ms", MEDIUM),
        _default_of("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", MEDIUM),
        _default_of("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", MEDIUM),
        ConfigKey("num.recovery.threads.per.data.dir", INT, 1, HIGH,
                  "Threads per log directory that load and recover logs at start-up and flush "
                  "them at shutdown.",
                  Validator.at_least(1)),
        ConfigKey("num.partitions", INT, 1, MEDIUM,
                  "Partitions of a topic created without a partition count (auto-creation).",
                  Validator.at_least(1)),
        ConfigKey("auto.create.topics.enable", BOOLEAN, True, HIGH,
                  "Create a topic when a client asks for metadata of a topic that does not "
                  "exist."),
        ConfigKey("delete.topic.enable", BOOLEAN, True, HIGH,
                  "Allow topics to be deleted; when false, delete requests are refused."),
        ConfigKey("create.topics.max.partitions.per.request", INT, 10000, MEDIUM,
                  "Partitions one CreateTopics request (all its topics together) may create; a "
                  "request asking for more is refused with POLICY_VIOLATION and creates nothing. "
                  "Kafka's controller refuses more than 10000 the same way.",
                  Validator.at_least(1)),
        ConfigKey("auto.create.topics.max.per.request", INT, 100, MEDIUM,
                  "Topics one Metadata request may auto-create; the topics after these are "
                  "answered THROTTLING_QUOTA_EXCEEDED (retriable) and not created.",
                  Validator.at_least(1)),
        ConfigKey("auto.create.topics.max.per.second", DOUBLE, 100.0, MEDIUM,
                  "Topics the broker auto-creates per second at most, over all clients (bursts "
                  "up to one second's worth); topics beyond are answered "
                  "THROTTLING_QUOTA_EXCEEDED (retriable) and not created.",
                  Validator.above(0)),
        ConfigKey("offsets.topic.num.partitions", INT, 50, HIGH,
                  "Partitions of the __consumer_offsets topic, which holds committed offsets "
                  "and group metadata; read when the topic is created, not after.",
                  Validator.at_least(1)),
        ConfigKey("offsets.topic.segment.bytes", INT, 100 * MIB, HIGH,
                  "Segment size of the __consumer_offsets topic, kept small so its compaction "
                  "and loading stay fast; at least a topic's segment.bytes floor (1 MiB), "
                  "else the topic could never be created and no group could form.",
                  Validator.at_least(MIN_SEGMENT_BYTES)),
        ConfigKey("offsets.load.buffer.size", INT, 5 * MIB, HIGH,
                  "Bytes read at a time from __consumer_offsets while the group state is "
                  "rebuilt at start-up.",
                  Validator.at_least(1)),
        ConfigKey("offsets.retention.minutes", INT, 10080, HIGH,
                  "How long the committed offsets of a group without members are kept, "
                  "counted from the moment it became empty (or from the commit).",
                  Validator.at_least(1)),
        ConfigKey("offsets.retention.check.interval.ms", LONG, 600000, HIGH,
                  "How often the group coordinator looks for expired offsets.",
                  Validator.at_least(1)),
        ConfigKey("offsets.commit.timeout.ms", INT, 5000, HIGH,
                  "How long an offset commit waits for its append to __consumer_offsets to be "
                  "fsync'ed before it fails with REQUEST_TIMED_OUT.",
                  Validator.at_least(1)),
        ConfigKey("offset.metadata.max.bytes", INT, 4096, HIGH,
                  "Largest metadata string a committed offset may carry.",
                  Validator.at_least(0)),
        ConfigKey("group.initial.rebalance.delay.ms", INT, 3000, MEDIUM,
                  "How long the first rebalance of an empty group waits for more members to "
                  "join, so they are assigned in one round instead of one each.",
                  Validator.at_least(0)),
        ConfigKey("group.min.session.timeout.ms", INT, 6000, MEDIUM,
                  "Smallest session.timeout.ms a group member may ask for.",
                  Validator.at_least(0)),
        ConfigKey("group.max.session.timeout.ms", INT, 1800000, MEDIUM,
                  "Largest session.timeout.ms a group member may ask for.",
                  Validator.at_least(0)),
        ConfigKey("group.max.size", INT, 2**31 - 1, MEDIUM,
                  "Most members a consumer group may have; more are refused with "
                  "GROUP_MAX_SIZE_REACHED.",
                  Validator.at_least(1)),
        ConfigKey("transaction.max.timeout.ms", INT, 900000, HIGH,
                  "Largest transaction.timeout.ms a transactional producer may ask for; "
                  "InitProducerId with a larger one is refused with INVALID_TRANSACTION_TIMEOUT.",
                  Validator.at_least(1)),
        ConfigKey("transactional.id.expiration.ms", INT, 604800000, HIGH,
                  "How long a transactional id with no transaction open is kept after its last "
                  "update; then the coordinator removes it (a tombstone in __transaction_state).",
                  Validator.at_least(1)),
        ConfigKey("transaction.state.log.num.partitions", INT, 50, HIGH,
                  "Partitions of the __transaction_state topic, which holds the transaction "
                  "coordinator's state; read when the topic is created, not after.",
                  Validator.at_least(1)),
        ConfigKey("transaction.state.log.segment.bytes", INT, 100 * MIB, HIGH,
                  "Segment size of the __transaction_state topic, kept small so its compaction "
                  "and loading stay fast.",
                  Validator.at_least(MIN_SEGMENT_BYTES)),
        ConfigKey("transaction.state.log.load.buffer.size", INT, 5 * MIB, LOW,
                  "Bytes read at a time from __transaction_state while the coordinator's state "
                  "is rebuilt at start-up.",
                  Validator.at_least(1)),
        ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, LOW,
                  "How often the coordinator looks for transactions open longer than their "
                  "transaction.timeout.ms, and aborts them.",
                  Validator.at_least(1)),
        ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000,
                  LOW,
                  "How often the coordinator looks for transactional ids idle longer than "
                  "transactional.id.expiration.ms, and removes them.",
                  Validator.at_least(1)),
        ConfigKey("transaction.partition.verification.enable", BOOLEAN, True, LOW,
                  "Whether a transactional batch is appended only to a partition of its "
                  "producer's open transaction (checked with the coordinator before the "
                  "append); off, only the producer state's checks apply."),
        ConfigKey("socket.request.max.bytes", INT, 100 * MIB, HIGH,
                  "Largest request the broker reads; larger ones close the connection.",
                  Validator.at_least(1)),
        ConfigKey("queued.max.request.bytes", LONG, DEFAULT_QUEUED_MAX_REQUEST_BYTES, MEDIUM,
                  "Memory all connections together may hold for requests, from their first byte "
                  "until their response is sent; at the limit the broker stops reading sockets "
                  "until requests finish. Buffers grow as bytes arrive, not from a size prefix. "
                  "-1 means no limit (Kafka's default); otherwise at least "
                  "socket.request.max.bytes.",
                  Validator.at_least(-1)),
        ConfigKey("socket.request.timeout.ms", INT, 30000, MEDIUM,
                  "Time a request may take to arrive, from its first byte to its last; a "
                  "connection still sending one after that (a trickle) is closed. Time the "
                  "broker stops reading a client that does not read its responses does not "
                  "count; time waiting for queued.max.request.bytes does.",
                  Validator.at_least(1)),
        ConfigKey("max.connections", INT, DEFAULT_MAX_CONNECTIONS, MEDIUM,
                  "Client connections the broker accepts at once; more are closed on accept. "
                  "Kafka's default is 2147483647; 10000 keeps within a usual file-descriptor "
                  "limit.",
                  Validator.at_least(0)),
        ConfigKey("connections.max.idle.ms", LONG, 600000, MEDIUM,
                  "Idle time after which the broker closes a client connection.",
                  Validator.at_least(1)),
        ConfigKey("log.level", STRING, "INFO", LOW,
                  "Level of the broker's own log messages.", Validator.one_of(*LOG_LEVELS)),
        ConfigKey("log.format", STRING, "text", LOW,
                  "Format of the broker's own log messages: text lines or one JSON object a line.",
                  Validator.one_of(*LOG_FORMATS)),
    ]
)
