"""odradek's msgpack wire protocol, one module per API family, named as in server/kafka/.

- connection: MsgpackConnection, a client connection speaking the msgpack protocol.
- groups: MsgpackGroupApis (FindCoordinator, Join/Sync/Leave, Heartbeat, offsets, group admin).
- quotas: MsgpackQuotaApis (DescribeClientQuotas, AlterClientQuotas).
- kafka_data: MsgpackKafkaData, the APIs whose messages carry Kafka's own request data
  (transactions, DescribeCluster), answered by the Kafka handlers, unchanged.

The other families (records, topics, configs, SASL) are answered straight by the handlers the
shared router (server/apis.py) names: ReplicaManager, AdminManager and the router itself.
"""
