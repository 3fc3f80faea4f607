"""Kafka's wire protocol, one module per API family; server/msgpack/ has the same names for the
families both protocols serve.

- connection: KafkaConnection, a client connection speaking Kafka's protocol.
- request, request_handler: a decoded Kafka request and KafkaRequestHandler, which answers
  Produce, Fetch, ListOffsets, Metadata and ApiVersions itself and dispatches the rest.
- groups: KafkaGroupApis (FindCoordinator, Join/Sync/Leave, Heartbeat, offsets, group admin).
- topics: KafkaTopicApis (CreateTopics, DeleteTopics, CreatePartitions).
- configs: KafkaConfigApis (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs).
- acls: KafkaAclApis (CreateAcls, DescribeAcls, DeleteAcls).
- quotas: KafkaQuotaApis (DescribeClientQuotas, AlterClientQuotas).
- security: KafkaSecurityApis (SaslHandshake, SaslAuthenticate, SCRAM credentials).
- partition_admin: KafkaPartitionAdminApis (DescribeLogDirs, ElectLeaders).
"""
