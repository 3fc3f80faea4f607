"""MetaProperties: the identity in meta.properties, written once and checked at start-up."""

from __future__ import annotations

import re

import pytest

from odradek.errors import InconsistentClusterIdError
from odradek.storage.meta_properties import (
    META_PROPERTIES_FILE_NAME,
    MetaProperties,
    generate_cluster_id,
)


def test_write_then_read_round_trips_in_kafkas_key_names(tmp_path):
    MetaProperties("abc-DEF_123", 3).write(tmp_path)
    text = (tmp_path / META_PROPERTIES_FILE_NAME).read_text()
    assert "version=0\n" in text and "broker.id=3\n" in text and "cluster.id=abc-DEF_123\n" in text
    assert MetaProperties.read(tmp_path) == MetaProperties("abc-DEF_123", 3)


def test_missing_file_reads_as_none(tmp_path):
    assert MetaProperties.read(tmp_path) is None


@pytest.mark.parametrize(
    "text",
    ["version=0\nbroker.id=1\n", "version=0\nbroker.id=one\ncluster.id=c\n", "garbage"],
)
def test_malformed_file_is_refused_with_its_path(tmp_path, text):
    (tmp_path / META_PROPERTIES_FILE_NAME).write_text(text)
    with pytest.raises(InconsistentClusterIdError, match="meta.properties is malformed"):
        MetaProperties.read(tmp_path)


def test_kafkas_kraft_version_1_names_the_broker_by_node_id(tmp_path):
    """What Kafka 4's storage format writes (tests/test_kafka_reference_files.py starts odradek
    on a real one)."""
    (tmp_path / META_PROPERTIES_FILE_NAME).write_text(
        "#\n#Thu Nov 26 05:21:13 UTC 2026\nnode.id=1\ndirectory.id=J8aAPcfLQt2bqs1JT_rRWQ\n"
        "version=1\ncluster.id=WsaQbjxXS4-d3V2gwSUpXg\n"
    )
    assert MetaProperties.read(tmp_path) == MetaProperties("WsaQbjxXS4-d3V2gwSUpXg", 1, 1)


def test_version_1_without_node_id_is_malformed(tmp_path):
    (tmp_path / META_PROPERTIES_FILE_NAME).write_text("version=1\nbroker.id=1\ncluster.id=c\n")
    with pytest.raises(InconsistentClusterIdError, match="malformed.*node.id"):
        MetaProperties.read(tmp_path)


def test_unknown_version_is_refused(tmp_path):
    (tmp_path / META_PROPERTIES_FILE_NAME).write_text("version=2\nnode.id=1\ncluster.id=c\n")
    with pytest.raises(InconsistentClusterIdError, match="unsupported version 2"):
        MetaProperties.read(tmp_path)


def test_reconcile_generates_a_kafka_style_cluster_id_for_fresh_dirs(tmp_path):
    meta = MetaProperties.reconcile({tmp_path / "a": None, tmp_path / "b": None}, 5, None)
    assert meta.broker_id == 5
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", meta.cluster_id)
    assert generate_cluster_id() != generate_cluster_id()


def test_reconcile_keeps_the_stored_cluster_id(tmp_path):
    stored = {tmp_path / "a": MetaProperties("stored", 1), tmp_path / "b": None}
    assert MetaProperties.reconcile(stored, 1, None) == MetaProperties("stored", 1)
    assert MetaProperties.reconcile(stored, 1, "stored") == MetaProperties("stored", 1)


def test_reconcile_refuses_another_broker_id(tmp_path):
    stored = {tmp_path / "a": MetaProperties("c", 1)}
    with pytest.raises(InconsistentClusterIdError, match="broker.id=1, but .* broker.id=2"):
        MetaProperties.reconcile(stored, 2, None)


def test_reconcile_refuses_another_configured_cluster(tmp_path):
    stored = {tmp_path / "a": MetaProperties("old", 1)}
    with pytest.raises(InconsistentClusterIdError, match="cluster.id=old, but .* cluster.id=new"):
        MetaProperties.reconcile(stored, 1, "new")


def test_reconcile_refuses_dirs_of_different_clusters(tmp_path):
    stored = {tmp_path / "a": MetaProperties("one", 1), tmp_path / "b": MetaProperties("two", 1)}
    with pytest.raises(InconsistentClusterIdError, match="different clusters"):
        MetaProperties.reconcile(stored, 1, None)
