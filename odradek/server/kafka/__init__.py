"""Kafka's wire protocol, one module per API family; server/msgpack/ has the same names for the
families both protocols serve.

- connection: KafkaConnection, a client connection speaking Kafka's protocol.
- request, request_handler: a decoded Kafka request and KafkaRequestHandler, which decodes
  requests, answers the common Produce and Fetch at once (durable_answer at acks=all), counts
  quotas, hands the rest to their family's handlers and frames the answers.
- metadata: KafkaMetadataApis (ApiVersions, Metadata, DescribeCluster).
- produce: KafkaProduceApis (Produce).
- fetch: KafkaFetchApis (Fetch).
- offsets: KafkaOffsetApis (ListOffsets, OffsetForLeaderEpoch, DeleteRecords).
- producers: KafkaProducerApis (InitProducerId, DescribeProducers).
- transactions: KafkaTransactionApis (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, ...).
- groups: KafkaGroupApis (FindCoordinator, Join/Sync/Leave, Heartbeat, offsets, group admin).
- topics: KafkaTopicApis (CreateTopics, DeleteTopics, CreatePartitions).
- configs: KafkaConfigApis (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs).
- acls: KafkaAclApis (CreateAcls, DescribeAcls, DeleteAcls).
- quotas: KafkaQuotaApis (DescribeClientQuotas, AlterClientQuotas).
- security: KafkaSecurityApis (SaslHandshake, SaslAuthenticate, SCRAM credentials).
- partition_admin: KafkaPartitionAdminApis (DescribeLogDirs, ElectLeaders).
"""
