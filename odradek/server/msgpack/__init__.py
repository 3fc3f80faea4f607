"""odradek's msgpack wire protocol, one module per API family, named as in server/kafka/.

- connection: MsgpackConnection, a client connection speaking the msgpack protocol.
- metadata: MsgpackMetadataApis (Metadata).
- topics: MsgpackTopicApis (CreateTopics, DeleteTopics, CreatePartitions).
- configs: MsgpackConfigApis (DescribeConfigs, AlterConfigs).
- offsets: MsgpackOffsetApis (ListOffsets, DeleteRecords).
- producers: MsgpackProducerApis (InitProducerId v0).
- groups: MsgpackGroupApis (FindCoordinator, Join/Sync/Leave, Heartbeat, offsets, group admin).
- quotas: MsgpackQuotaApis (DescribeClientQuotas, AlterClientQuotas).
- kafka_data: MsgpackKafkaData, the APIs whose messages carry Kafka's own request data
  (transactions, DescribeCluster), answered by the Kafka handlers, unchanged.

Each family module maps its messages onto the AdminManager's and ReplicaManager's plain calls,
the ones the Kafka module of the same name makes. Produce, Fetch, ApiVersions, SASL and
DescribeTopicPartitions are answered straight by the handlers the shared router
(server/apis.py) names: ReplicaManager, AdminManager and the router itself.
"""
