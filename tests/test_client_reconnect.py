"""Clients back off while the broker is away, as Kafka's do (``reconnect.backoff.ms`` 50
doubling to ``reconnect.backoff.max.ms`` 1000, with jitter), and say once that it went away
and once that it is back: ``odradek consume`` and ``odradek produce`` run as processes
through a proxy that counts their connection attempts, while the broker is killed and
started again."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from serve_process import ServeProcess

from odradek.client import Admin, NewTopic
from odradek.client.event_loop_thread import EventLoopThread

pytestmark = pytest.mark.slow

ODRADEK = Path(sys.executable).with_name("odradek")
DOWN_S = 5.0
# Attempts at 50, 100, 200, 400, 800 ms (each +-20%), then one a second: about 9 in 5 s;
# without backoff it was over 60 per client.
MAX_ATTEMPTS_PER_CLIENT = 12


class CountingProxy:
    """A TCP proxy to the broker at ``target_port`` (which may change: a restarted broker)
    that counts the connections clients open through it. A connection the broker ends, by
    EOF or reset, ends on the client's side too, as a direct one would."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.accepted = 0
        self._loop_thread = EventLoopThread(name="counting-proxy")
        self._server = self._loop_thread.run(
            asyncio.start_server(self._serve, "127.0.0.1", 0), timeout=10
        )
        self.bootstrap = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def close(self) -> None:
        self._server.close()
        self._loop_thread.run(self._server.wait_closed(), timeout=10)

    async def _serve(self, client_reader, client_writer) -> None:
        self.accepted += 1
        try:
            broker_reader, broker_writer = await asyncio.open_connection(
                "127.0.0.1", self.target_port
            )
        except OSError:
            client_writer.close()
            return

        async def pipe(reader, writer) -> None:
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except OSError:
                pass

        directions = [
            asyncio.create_task(pipe(client_reader, broker_writer)),
            asyncio.create_task(pipe(broker_reader, client_writer)),
        ]
        await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
        for task in directions:
            task.cancel()
        for writer in (client_writer, broker_writer):
            writer.transport.abort()


class Lines:
    """A process's output lines, read as they come."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._reader.start()

    def _read(self, stream) -> None:
        for line in stream:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for(self, text: str, timeout: float = 60) -> None:
        with self._changed:
            found = self._changed.wait_for(
                lambda: any(text in line for line in self.lines), timeout
            )
        assert found, f"no line with {text!r} in {timeout}s: {self.lines}"

    def join(self) -> list[str]:
        self._reader.join(timeout=30)
        return self.lines


def client(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(ODRADEK), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_clients_back_off_and_say_once_that_the_broker_went_away_and_came_back(
    tmp_path: Path,
) -> None:
    broker = ServeProcess(tmp_path / "data")
    proxy = CountingProxy(broker.port)
    consumer = producer = None
    try:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic("reconnect", 1)])
        server = ("--bootstrap-server", proxy.bootstrap)
        consumer = client("consume", "--topic", "reconnect", "--from-beginning", *server)
        producer = client("produce", "--topic", "reconnect", "--linger-ms", "0", *server)
        consumed, consumer_log = Lines(consumer.stdout), Lines(consumer.stderr)
        producer_log = Lines(producer.stderr)
        producer.stdin.write("before\n")
        producer.stdin.flush()
        consumed.wait_for("before")

        broker.stop(9)  # SIGKILL: the broker goes away at once
        attempts_before = proxy.accepted
        producer.stdin.write("during\n")  # sent once the broker is back
        producer.stdin.flush()
        time.sleep(DOWN_S)  # the outage itself, not a wait for the clients
        attempts = proxy.accepted - attempts_before
        broker = ServeProcess(tmp_path / "data")
        proxy.target_port = broker.port

        consumed.wait_for("during")
        producer.stdin.write("after\n")
        producer.stdin.close()
        assert producer.wait(timeout=60) == 0
        consumed.wait_for("after")
        consumer.terminate()
        consumer.wait(timeout=30)
        logs = {"consumer": consumer_log.join(), "producer": producer_log.join()}
    finally:
        for process in (consumer, producer):
            if process is not None and process.poll() is None:
                process.kill()
        proxy.close()
        broker.stop()
    print(f"{attempts} connection attempts in {DOWN_S} s down; logs {logs}")
    assert 2 <= attempts <= 2 * MAX_ATTEMPTS_PER_CLIENT, logs
    for name, lines in logs.items():
        went_away = [line for line in lines if "went away" in line]
        back = [line for line in lines if "is back" in line]
        assert len(went_away) == 1 and len(back) == 1, (name, lines)
        assert proxy.bootstrap in went_away[0] and proxy.bootstrap in back[0], (name, lines)
        assert len(lines) == 2, (name, lines)  # nothing else: no retry line per attempt
