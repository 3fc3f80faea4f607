"""ServeProcess: ``odradek serve`` as a child process on free ports, for the operations tests
(health check, logging, Prometheus)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

START_TIMEOUT_S = 30.0


def free_port() -> int:
    """A loopback port nothing listens on now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` different loopback ports nothing listens on now (each held until all are
    picked: ports picked one after another may be the same one twice)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def serve_command(data_dir: Path, port: int, metrics_port: int, *args: str) -> list[str]:
    """``odradek serve`` on ``data_dir`` and the given ports."""
    command = [sys.executable, "-m", "odradek.cli.main", "serve", "--data-dir", str(data_dir)]
    return command + ["--port", str(port), "--metrics-port", str(metrics_port), *args]


class ServeProcess:
    """``odradek serve --data-dir DATA_DIR --port P --metrics-port M *ARGS`` on free ports,
    ready once both its metrics endpoint and its Kafka listener accept connections (the
    metrics port is bound before the listener serves), whatever its log level. Every line it
    logs is kept in ``lines``; a context manager that stops it with SIGTERM. ``preexec_fn``
    runs in the child before it starts (to set resource limits), ``env`` adds variables;
    ``ports`` (listener, metrics) instead of free ones: a restart on the same address, where
    its clients still look for it."""

    def __init__(
        self,
        data_dir: Path,
        *args: str,
        preexec_fn: Callable[[], None] | None = None,
        env: Mapping[str, str] | None = None,
        ports: tuple[int, int] | None = None,
    ) -> None:
        self.port, self.metrics_port = ports or free_ports(2)
        command = serve_command(data_dir, self.port, self.metrics_port, *args)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.process = subprocess.Popen(
            command, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=preexec_fn
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._keep_reading, daemon=True)
        self._reader.start()
        self._wait_until_serving()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.process.poll() is None and time.monotonic() < deadline:
            try:
                for port in (self.metrics_port, self.port):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise AssertionError("the broker did not start:\n" + "".join(self.lines))

    def _keep_reading(self) -> None:
        for line in self.process.stderr:
            self.lines.append(line)

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """Send ``signum`` (SIGTERM by default), then the exit status once it has stopped."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
        code = self.process.wait(timeout=30)
        self._reader.join(timeout=5)
        return code

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
