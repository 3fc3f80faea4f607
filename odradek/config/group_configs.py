"""A group's configs as Apache Kafka 4.4 describes them (KIP-848's consumer groups, KIP-932's
share groups, KIP-1071's streams groups): each key, its default, its type and the broker
setting it is a synonym of. odradek's groups are classic ones, which none of these keys
configure, so they are described with their defaults and never altered."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupConfigKey:
    """One group config: its name, default value, Kafka's ``ConfigResource.Type`` number of its
    type, the broker setting whose value is its default, and its documentation."""

    name: str
    default: str
    config_type: int
    broker_synonym: str
    doc: str


GROUP_CONFIG_KEYS: tuple[GroupConfigKey, ...] = (
    GroupConfigKey(
        "consumer.session.timeout.ms",
        "45000",
        3,
        "group.consumer.session.timeout.ms",
        "The timeout to detect client failures when using the consumer group protocol.",
    ),
    GroupConfigKey(
        "streams.assignor.name",
        "sticky",
        2,
        "group.streams.assignors",
        (
            "The task assignor to use for this streams group, selected by short name from the "
            "assignors registered via the broker configuration group.streams.assignors. When "
            "unset, the group defaults to the first assignor configured in the broker's "
            "group.streams.assignors setting. Changing the assignor does not trigger a rebalance "
            "for the group; the new assignor takes effect on the next rebalance."
        ),
    ),
    GroupConfigKey(
        "consumer.assignment.interval.ms",
        "1000",
        3,
        "group.consumer.assignment.interval.ms",
        "The interval between assignment updates for a consumer group.",
    ),
    GroupConfigKey(
        "errors.deadletterqueue.copy.record.enable",
        "false",
        1,
        "errors.deadletterqueue.copy.record.enable",
        (
            "When writing onto the dead-letter queue topic, whether to copy the original record "
            "onto the DLQ topic, or just write a record containing the context information headers."
        ),
    ),
    GroupConfigKey(
        "share.auto.offset.reset",
        "latest",
        2,
        "share.auto.offset.reset",
        (
            "The strategy to initialize the share-partition start offset. <ul><li>earliest: "
            "automatically reset the offset to the earliest offset</li><li>latest: automatically "
            "reset the offset to the latest offset</li><li>by_duration:&lt;duration&gt;: "
            "automatically reset the offset to a configured duration from the current timestamp. "
            "&lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). Negative "
            "duration is not allowed.</li><li>anything else: throw exception to the share "
            "consumer.</li></ul>"
        ),
    ),
    GroupConfigKey(
        "streams.rack.aware.assignment.tags",
        "",
        7,
        "group.streams.rack.aware.assignment.tags",
        (
            "List of client tag keys used to distribute standby replicas across Kafka Streams "
            "instances. When configured, and the used broker-side assignor supports it, it will "
            "make a best-effort to distribute standby tasks over each client tag dimension."
        ),
    ),
    GroupConfigKey(
        "share.renew.acknowledge.enable",
        "true",
        1,
        "share.renew.acknowledge.enable",
        "Whether the renew acknowledge type is enabled for the share group.",
    ),
    GroupConfigKey(
        "streams.initial.rebalance.delay.ms",
        "3000",
        3,
        "group.streams.initial.rebalance.delay.ms",
        (
            "The amount of time the group coordinator will wait for more streams clients to join a "
            "new group before performing the first rebalance. A longer delay means potentially "
            "fewer rebalances."
        ),
    ),
    GroupConfigKey(
        "share.session.timeout.ms",
        "45000",
        3,
        "group.share.session.timeout.ms",
        "The timeout to detect client failures when using the share group protocol.",
    ),
    GroupConfigKey(
        "streams.assignment.interval.ms",
        "1000",
        3,
        "group.streams.assignment.interval.ms",
        "The interval between assignment updates for a streams group.",
    ),
    GroupConfigKey(
        "share.heartbeat.interval.ms",
        "5000",
        3,
        "group.share.heartbeat.interval.ms",
        "The heartbeat interval given to the members of a share group.",
    ),
    GroupConfigKey(
        "streams.heartbeat.interval.ms",
        "5000",
        3,
        "group.streams.heartbeat.interval.ms",
        "The heartbeat interval given to the members.",
    ),
    GroupConfigKey(
        "share.delivery.count.limit",
        "5",
        3,
        "group.share.delivery.count.limit",
        "The maximum number of delivery attempts for a record delivered to a share group.",
    ),
    GroupConfigKey(
        "errors.deadletterqueue.topic.name",
        "",
        2,
        "errors.deadletterqueue.topic.name",
        (
            "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share "
            "group. If blank (the default), the group does not have a DLQ topic."
        ),
    ),
    GroupConfigKey(
        "consumer.heartbeat.interval.ms",
        "5000",
        3,
        "group.consumer.heartbeat.interval.ms",
        "The heartbeat interval given to the members of a consumer group.",
    ),
    GroupConfigKey(
        "share.record.lock.duration.ms",
        "30000",
        3,
        "group.share.record.lock.duration.ms",
        "The record acquisition lock duration in milliseconds for share groups.",
    ),
    GroupConfigKey(
        "share.assignment.interval.ms",
        "1000",
        3,
        "group.share.assignment.interval.ms",
        "The interval between assignment updates for a share group.",
    ),
    GroupConfigKey(
        "share.isolation.level",
        "read_uncommitted",
        2,
        "share.isolation.level",
        (
            'Controls how to read records written transactionally. If set to "read_committed", the '
            "share group will only deliver transactional records which have been committed. If set "
            'to "read_uncommitted", the share group will return all messages, even transactional '
            "messages which have been aborted. Non-transactional records will be returned "
            "unconditionally in either mode."
        ),
    ),
    GroupConfigKey(
        "streams.session.timeout.ms",
        "45000",
        3,
        "group.streams.session.timeout.ms",
        "The timeout to detect client failures when using the streams group protocol.",
    ),
    GroupConfigKey(
        "share.partition.max.record.locks",
        "2000",
        3,
        "group.share.partition.max.record.locks",
        "Share-group record lock limit per share-partition.",
    ),
    GroupConfigKey(
        "streams.num.standby.replicas",
        "0",
        3,
        "group.streams.num.standby.replicas",
        "The number of standby replicas for each task.",
    ),
)
"""In the order Kafka 4.4 lists them."""
