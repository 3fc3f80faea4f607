"""Typed settings: the topic-level ``LogConfig``, the broker-level ``BrokerConfig`` and their
loading from Kafka-style properties, the environment and the command line.

Each setting is declared once, in a key table (``topic_configs``, ``broker_configs``) that
parsing, validation, DescribeConfigs and docs/config.md all read.
"""
