"""The broker: requests answered over the network layer (odradek.network).

- broker: Broker, which builds and runs everything below.
- apis: ApiRouter, the shared router of decoded requests to their handlers.
- kafka/, msgpack/: each wire protocol's connection and handlers, one module per API family,
  the same module name in both where both serve the family.
- replica_manager, partition, delayed_fetch*, log_read_result, group_commit: produce and fetch
  on the partitions' logs.
- authorization/: the authorizer and the ACL checks of the APIs and groups.
- admin/: topic administration (TopicAdmin, AdminManager, auto-creation, topic ids).
- group/, transaction/, producer_id_manager: coordination.
- quota/: client quotas; metrics/: the broker's Prometheus metrics and collectors.
"""
