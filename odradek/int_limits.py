"""The bounds of Kafka's fixed-width integer types (int16, int32, int64): one definition,
imported by the protocol, record, storage, cleaner and client code that checks against them."""

INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
