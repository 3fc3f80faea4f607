"""The reference Kafka's start-up survives a port taken under it, as happens when several suites
run on one machine: the tool tries again, and a broker that cannot start at all fails with its
log's tail and status 1 (not 2, which would read as "Kafka could not be resolved")."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
from kafka_reference import TOOL, tool

pytestmark = pytest.mark.reference_kafka


def held_port() -> socket.socket:
    """A listening socket on a loopback port, so that Kafka's bind on it fails."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder


def test_a_start_whose_port_is_taken_tries_again_once_it_is_free(tmp_path: Path) -> None:
    tool("resolve")
    holder = held_port()
    port = holder.getsockname()[1]
    starting = subprocess.Popen(
        [str(TOOL), "start", "--dir", str(tmp_path), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    errors = []
    try:
        assert starting.stderr is not None and starting.stdout is not None
        for line in starting.stderr:  # to its end: the broker started or the tool gave up
            errors.append(line)
            if "start attempt 1:" in line:
                holder.close()  # free the port for the next attempt
        output = starting.stdout.read()
        starting.wait(timeout=60)
    finally:
        holder.close()
        if starting.poll() is None:
            starting.kill()
    assert starting.returncode == 0, "".join(errors)
    started = json.loads(output)
    assert started["bootstrap"] == f"127.0.0.1:{port}"
    assert "Address already in use" in "".join(errors)
    tool("stop", "--dir", str(tmp_path))


def test_a_broker_that_cannot_start_fails_with_its_log_and_status_one(tmp_path: Path) -> None:
    tool("resolve")
    holder = held_port()
    try:
        done = subprocess.run(
            [str(TOOL), "start", "--dir", str(tmp_path), "--port", str(holder.getsockname()[1])],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        holder.close()
    assert done.returncode == 1, done.stderr
    assert "after 4 attempts" in done.stderr
    assert "Address already in use" in done.stderr
    assert "server.log" in done.stderr
