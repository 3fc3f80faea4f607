"""TLS against plaintext, side by side in one run, and SCRAM logins per second (prints only).

(a) produce MB/s with confluent-kafka (1 KB records, acks=1) on the PLAINTEXT listener and on
    the SSL listener of one broker;
(b) fetch MB/s of one topic (16 KB records, so the consumer's per-record cost does not hide
    the broker's) read from offset 0 by a fresh confluent-kafka consumer on each listener:
    plaintext fetches use sendfile, TLS fetches copy (sendfile would send plaintext); the
    broker's sendfile and copied byte counters are printed to show which path ran;
(c) SCRAM-SHA-512 and SCRAM-SHA-256 logins per second on the SASL_PLAINTEXT listener (odradek's
    client: connect, ApiVersions, SaslHandshake, two SaslAuthenticate rounds), 8 at a time,
    with the broker's CPU per login, and the same over SASL_SSL (TLS handshake included).

Target (issue 20): TLS fetch at least 50% of plaintext fetch.

Usage: ``python bench/security.py [--quick]`` (``--quick``: a fifth of the volumes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import uvloop
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.config import ClientConfig
from odradek.client.connection import Connection
from odradek.security.credential_store import CredentialStore
from odradek.security.scram_credential import ScramCredential

REPO = Path(__file__).resolve().parent.parent
MB = 1024 * 1024
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVING = re.compile(r"serving on (.*) \(metrics on [^:]+:(\d+)\)")
USER, PASSWORD = "bench", "bench-secret"


class SecureBroker:
    """``odradek serve`` with a listener of each security protocol, in a child process."""

    def __init__(self, data_dir: Path, certs: Path) -> None:
        listeners = ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS)
        settings = {
            "listeners": listeners,
            "ssl.keystore.location": certs / "broker.pem",
            "ssl.truststore.location": certs / "ca.pem",
        }
        command = [sys.executable, "-m", "odradek.cli.main", "serve", "--data-dir", str(data_dir)]
        command += ["--metrics-port", "0"]
        for key, value in settings.items():
            command += ["--set", f"{key}={value}"]
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        for line in self.process.stderr:
            if match := SERVING.search(line):
                self.ports = {
                    name: int(port)
                    for name, port in re.findall(r"(\w+)://[^:]+:(\d+)", match.group(1))
                }
                self.metrics_port = int(match.group(2))
                break
        else:
            raise RuntimeError("the broker did not start")
        threading.Thread(target=self.process.stderr.read, daemon=True).start()

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def fetch_bytes(self) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        found = re.findall(r'odradek_fetch_bytes_total\{path="(\w+)"\} ([0-9.e+]+)', text)
        return {path: float(value) for path, value in found}

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def kafka_config(broker: SecureBroker, listener: str, certs: Path) -> dict[str, str]:
    config = {
        "bootstrap.servers": f"127.0.0.1:{broker.ports[listener]}",
        "security.protocol": listener,
    }
    if "SSL" in listener:
        config["ssl.ca.location"] = str(certs / "ca.pem")
    if listener.startswith("SASL"):
        config |= {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER,
                   "sasl.password": PASSWORD}  # fmt: skip
    return config


def produce_mb_s(
    config: dict[str, str], topic: str, total_mb: int, value_bytes: int = 1024
) -> float:
    value = os.urandom(value_bytes)
    producer = Producer({**config, "acks": 1, "linger.ms": 5, "enable.idempotence": False})
    count = total_mb * MB // len(value)
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return total_mb / (time.perf_counter() - started)


def fetch_mb_s(config: dict[str, str], topic: str, total_mb: int) -> float:
    consumer = Consumer(
        {**config, "group.id": "bench", "enable.auto.commit": False,
         "fetch.max.bytes": 50 * MB, "max.partition.fetch.bytes": 8 * MB}  # fmt: skip
    )
    consumer.assign([KafkaTopicPartition(topic, 0, 0)])
    wanted = total_mb * MB
    received = 0
    started = None  # from the first record: connecting and metadata are not the fetch path
    while received < wanted:
        for message in consumer.consume(10000, 1.0):
            if not message.error():
                started = started or time.perf_counter()
                received += len(message.value())
    elapsed = time.perf_counter() - started
    consumer.close()
    return received / MB / elapsed


async def logins_per_s(port: int, mechanism: str, certs: Path, tls: bool, count: int) -> float:
    settings = {
        "bootstrap_servers": f"127.0.0.1:{port}",
        "security_protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_username": USER,
        "sasl_password": PASSWORD,
        "ssl_ca_location": str(certs / "ca.pem"),
    }
    security = ClientConfig(**settings).security()
    semaphore = asyncio.Semaphore(8)

    async def login() -> None:
        async with semaphore:
            connection = Connection(
                "127.0.0.1", port, client_id="bench", request_timeout_ms=30000, security=security
            )
            await connection.connect()
            await connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(login() for _ in range(count)))
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    total_mb = 40 if args.quick else 200
    logins = 100 if args.quick else 500
    with tempfile.TemporaryDirectory() as scratch:
        certs, data = Path(scratch) / "certs", Path(scratch) / "data"
        subprocess.run(
            ["sh", str(REPO / "deploy" / "make-test-certs.sh"), str(certs)],
            check=True,
            capture_output=True,
        )
        store = CredentialStore(data)
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            store.upsert(USER, ScramCredential.from_password(mechanism, PASSWORD))
        broker = SecureBroker(data, certs)
        try:
            plain = kafka_config(broker, "PLAINTEXT", certs)
            tls = kafka_config(broker, "SSL", certs)
            admin = AdminClient(plain)
            for name in ("plain", "tls", "fetched"):
                admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
            print(f"(a) produce, confluent-kafka, 1 KB records, acks=1, {total_mb} MB each")
            for name, config in (("plain", plain), ("tls", tls)):
                print(f"    {name:5s}: {produce_mb_s(config, name, total_mb):7.1f} MB/s")
            produce_mb_s(plain, "fetched", total_mb, 16 * 1024)
            print(f"(b) fetch from offset 0, confluent-kafka, 16 KB records, {total_mb} MB each")
            results = {}
            for name, config in (("plain", plain), ("tls", tls)):
                before, cpu_before = broker.fetch_bytes(), broker.cpu_seconds()
                results[name] = fetch_mb_s(config, "fetched", total_mb)
                after, cpu = broker.fetch_bytes(), broker.cpu_seconds() - cpu_before
                paths = {p: (after.get(p, 0) - before.get(p, 0)) / MB for p in after}
                shown = ", ".join(f"{p} {v:.0f} MB" for p, v in sorted(paths.items()))
                per_gb = cpu * 1024 / max(1.0, sum(paths.values()))
                print(
                    f"    {name:5s}: {results[name]:7.1f} MB/s   ({shown}; broker CPU "
                    f"{per_gb:.2f} s per GB)"
                )
            print(f"    TLS fetch / plaintext fetch: {results['tls'] / results['plain']:.0%}")
            print(f"(c) SCRAM logins, odradek client, 8 concurrent, {logins} each")
            for listener, use_tls in (("SASL_PLAINTEXT", False), ("SASL_SSL", True)):
                for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
                    cpu_before = broker.cpu_seconds()
                    rate = uvloop.run(
                        logins_per_s(broker.ports[listener], mechanism, certs, use_tls, logins)
                    )
                    cpu_ms = (broker.cpu_seconds() - cpu_before) * 1000 / logins
                    print(
                        f"    {listener:14s} {mechanism}: {rate:7.0f} logins/s, "
                        f"broker CPU {cpu_ms:.2f} ms per login"
                    )
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
