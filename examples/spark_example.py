"""The click-count pipeline from start to finish, in one command (``make spark-example``).

Starts a broker of its own (``odradek serve`` on a free loopback port and a temporary data
directory), unless ``--bootstrap`` names one already running (e.g. ``make run``'s), then runs
the two steps of examples/README.md as a user would:

    python examples/generate_clicks.py --count N --bootstrap HOST:PORT
    python examples/count_clicks.py batch --bootstrap HOST:PORT

and checks that the counts Spark wrote are the clicks that were sent (with a broker of its
own, whose topics start empty). Exit status 0 when they are; 1 when not or a step failed.
Spark needs Java 17.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
ODRADEK = Path(sys.executable).with_name("odradek")


def _free_port() -> int:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return listener.getsockname()[1]


@contextmanager
def own_broker() -> Iterator[str]:
    """``odradek serve`` on a temporary data directory; its bootstrap address while it runs."""
    with tempfile.TemporaryDirectory(prefix="odradek-spark-example-") as data_dir:
        port, metrics_port = _free_port(), _free_port()
        command = [str(ODRADEK), "serve", "--data-dir", data_dir, "--host", "127.0.0.1"]
        command += ["--port", str(port), "--metrics-port", str(metrics_port)]
        command += ["--log-level", "warning"]
        broker = subprocess.Popen(command)
        bootstrap = f"127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while subprocess.run(
                [str(ODRADEK), "health", "--bootstrap", bootstrap, "--timeout", "1"],
                capture_output=True,
            ).returncode:
                if broker.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"the broker did not start (exit status {broker.poll()})")
                time.sleep(0.2)
            print(f"broker serving on {bootstrap} (data in {data_dir})", flush=True)
            yield bootstrap
        finally:
            broker.send_signal(signal.SIGTERM)
            broker.wait(timeout=60)


def step(script: str, *args: str) -> dict[str, int]:
    """Run ``python examples/SCRIPT ARGS``, echoing what it prints; its ``page<TAB>count``
    lines as a mapping."""
    command = [sys.executable, str(HERE / script), *args]
    print("$ " + " ".join(["python", f"examples/{script}", *args]), flush=True)
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    print(done.stdout, end="", flush=True)
    if done.returncode:
        sys.exit(f"examples/{script} failed (exit status {done.returncode})")
    return {
        page: int(count)
        for page, count in (line.split("\t") for line in done.stdout.split("\n") if line)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000, help="clicks to send")
    parser.add_argument("--bootstrap", help="a running broker (default: start one)")
    args = parser.parse_args()
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        sys.exit("Spark needs Java 17: no java on PATH and no JAVA_HOME")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with own_broker() if args.bootstrap is None else _given(args.bootstrap) as bootstrap:
        sent = step("generate_clicks.py", "--count", str(args.count), "--bootstrap", bootstrap)
        counted = step("count_clicks.py", "batch", "--bootstrap", bootstrap)
    if args.bootstrap is not None:
        return  # a broker with earlier clicks counts those too
    if counted != sent:
        sys.exit(f"Spark counted {counted}, but {sent} clicks were sent")
    print(f"Spark counted all {sum(sent.values())} clicks per page, as they were sent")


@contextmanager
def _given(bootstrap: str) -> Iterator[str]:
    yield bootstrap


if __name__ == "__main__":
    main()
