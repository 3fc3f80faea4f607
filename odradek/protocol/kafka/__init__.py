"""Kafka's own wire protocol: request and response schemas, byte for byte as Kafka's clients
speak them (wire formats only, no sockets). The msgpack protocol of :mod:`odradek.protocol`
carries the same API bodies in odradek's framing; the broker answers both with one set of
handlers."""
