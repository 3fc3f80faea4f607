"""The record format: records, record batches, their builder, codecs and buffers of batches.

Kafka keeps these in the clients' ``common.record``; here the client, the broker's storage and
the Spark source all read and write batches through this package, and it depends on nothing of
the broker (no files, no sockets).
"""
