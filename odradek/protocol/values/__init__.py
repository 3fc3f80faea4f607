"""The request and response values both protocols share, and the field types they are declared
with: a partition's produce and fetch data and their results, ListOffsets' special timestamps,
and the isolation levels beside this package (protocol/isolation.py).

Kafka's handlers (server/kafka/, protocol/kafka/) take and return these; the msgpack protocol's
messages (the modules beside this package) are built of them, and its schema
(protocol/schema.py) reads their field types to encode and validate them. Nothing here knows
either protocol's wire.
"""
