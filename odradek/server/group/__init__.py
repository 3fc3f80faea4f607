"""The group coordinator: Kafka's classic consumer-group protocol over ``__consumer_offsets``."""
