"""Client quotas, as Kafka's: byte rates for produce and fetch and a share of request time,
per user and/or client id, measured over sampled windows; a client over its quota is told to
wait (throttle_time_ms) and its connection is muted for that long.

``sampled_rate.py`` (Kafka's Rate over a SampledStat), ``client_quota_entity.py`` (entities and
their precedence), ``client_quota_store.py`` (the quotas, persisted), ``client_quota_manager.py``
(one quota type's sensors and throttle times), ``client_quotas.py`` (the three managers and the
hooks the request paths call), ``quota_collector.py`` (their metrics).
"""
