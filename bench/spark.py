"""Spark format benchmark: a Spark batch read against the project's consumer, a Spark write,
and streaming micro-batches on a trickle of records.

Runs ``odradek serve`` as its own process on a temporary data directory.

Throughput (``--only throughput`` or ``all``): produces ``--records`` records of 100 B to a
topic of ``--partitions`` partitions, then measures in one run, each ``--repeat`` times (the
best is reported, the others only measure noise):

- the consumer: one Consumer reads every partition, with the settings the Spark reader uses;
- the Spark read: ``spark.read.format("odradek")`` into Spark's ``noop`` sink, so every row is
  read and converted but nothing else is done (the session is warm: one small read first);
- the Spark write: a DataFrame of as many 100 B values appended to a new topic.

Prints rows/s and the read ratio (target: Spark >= 50% of the consumer).

Micro-batches (``--only micro-batches`` or ``all``): the example's streaming job
(examples/count_clicks.py: a topic of 3 partitions, clicks counted per page, every count
written back with output mode complete) on a fresh session; before each micro-batch 5 records
arrive, and ``--micro-batches`` of them are timed after the first (Spark's ``durationMs``).
Prints how long the session took to start, how long until the first micro-batch had written
its counts, the later micro-batches' times (median, min, max: the spread is the noise) with
their phases, the CPU they cost per process kind, and the load average around the run (the
target: well under the 5 s trigger, under ~1 s on a quiet machine). In the same run it times
what a write task spends on its producer, a new one per task against one kept in the Python
worker (as the sink does), and what a read task spends opening its consumer.

First results (``--only first-results`` or ``all``): the time from starting the example's
streaming job to its first counts, phase by phase (the interpreter, the imports, the admin
client, the JVM and SparkSession, registering the format, the schema, the query's start, the
first micro-batch with Spark's ``durationMs``), and the processes Spark starts on the way (its
JVM, each Python daemon and worker, when it started). Every run is a fresh process
(bench/first_results_run.py) with a fresh checkpoint, on 5 clicks. ``--baseline DIR`` runs
another checkout's example (its ``examples`` and ``odradek``; build its C modules in place) in
interleaved rounds with this one's; ``--rounds`` of them (default 5). Prints medians with the
range, and the load average: on a shared machine only the side-by-side ratio means much.

Asserts nothing. Usage: ``PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/spark.py
[--only all|throughput|micro-batches|first-results] [--records 1000000] [--partitions 4]
[--master local[2]] [--repeat 3] [--micro-batches 10] [--rounds 5] [--baseline ../main]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

import odradek.spark
from odradek.client import Admin, Consumer, NewTopic, Producer
from odradek.spark.client_cache import ClientCache, settings_key
from odradek.spark.range_reader import READ_DEFAULTS
from odradek.spark.record_sender import WRITE_DEFAULTS
from odradek.topic_partition import TopicPartition

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import count_clicks  # noqa: E402
from click_topics import ensure_pipeline_topics  # noqa: E402
from generate_clicks import generate_clicks  # noqa: E402

VALUE_BYTES = 100
ODRADEK = Path(sys.executable).with_name("odradek")
CLICKS_PER_BATCH = 5
PHASES = ("latestOffset", "walCommit", "queryPlanning", "addBatch", "commitOffsets")
CLIENT_ROUNDS = 20


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def broker(data_dir: Path) -> Iterator[str]:
    """``odradek serve`` on free ports; yields its bootstrap address."""
    port = free_port()
    command = [ODRADEK, "serve", "--data-dir", data_dir, "--port", port]
    command += ["--metrics-port", free_port()]
    with open(data_dir.parent / "serve.log", "w") as log:
        process = subprocess.Popen(list(map(str, command)), stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("odradek serve did not start") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(30)


def fill(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """Create ``topic`` and produce ``records`` values of VALUE_BYTES; the produce rate."""
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions)])
    value = b"v" * VALUE_BYTES
    started = time.perf_counter()
    with Producer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024) as producer:
        for i in range(records):
            producer.send(topic, value, partition=i % partitions)
        producer.flush()
    return records / (time.perf_counter() - started)


def consumer_read(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """Rows/s of one Consumer reading the whole topic."""
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **READ_DEFAULTS) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        started = time.perf_counter()
        seen = 0
        while seen < records:
            seen += len(c.poll(1000))
        return records / (time.perf_counter() - started)


def spark_read(spark: SparkSession, bootstrap: str, topic: str, records: int) -> float:
    """Rows/s of a Spark batch read of the whole topic into the noop sink."""
    df = spark.read.format("odradek").option("bootstrap", bootstrap).option("topic", topic).load()
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return records / (time.perf_counter() - started)


def spark_write(spark: SparkSession, bootstrap: str, topic: str, records: int) -> float:
    """Rows/s of a Spark write of ``records`` values of VALUE_BYTES to ``topic``."""
    value = F.lpad(F.col("id").cast("string"), VALUE_BYTES, "v").cast("binary")
    df = spark.range(records).select(value.alias("value"))
    writer = df.write.format("odradek").mode("append").option("bootstrap", bootstrap)
    started = time.perf_counter()
    writer.option("topic", topic).save()
    return records / (time.perf_counter() - started)


def session(master: str) -> SparkSession:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(master)
        .appName("bench-spark")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)  # for an editable install (make install): see docs/spark.md
    return spark


def best(repeat: int, measure: Callable[[int], float]) -> float:
    """The highest of ``repeat`` rates; ``measure`` gets the attempt's number."""
    return max(measure(attempt) for attempt in range(repeat))


# -- micro-batches ------------------------------------------------------------------------------


def process_cpu_seconds() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of each descendant of this process, with its kind: the JVM,
    a Python worker, the broker. Empty where /proc is missing."""
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[str, float]] = {}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        pid, parent = int(entry.name), int(fields[1])
        children.setdefault(parent, []).append(pid)
        stats[pid] = (process_kind(command), (int(fields[11]) + int(fields[12])) / tick)
    found, pending = {}, list(children.get(os.getpid(), []))
    while pending:
        pid = pending.pop()
        if pid in stats:
            found[pid] = stats[pid]
        pending += children.get(pid, [])
    return found


def process_kind(command: str) -> str:
    if "java" in command.split(" ", 1)[0]:
        return "Spark JVM"
    if "pyspark.daemon" in command or "pyspark" in command:
        return "Python workers"
    if " serve " in command:
        return "broker"
    return "other"


def cpu_per_kind(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> dict[str, float]:
    """CPU seconds spent between two samples, per process kind (processes that ended in between
    are not counted)."""
    spent: dict[str, float] = {}
    for pid, (kind, seconds) in after.items():
        spent[kind] = spent.get(kind, 0.0) + seconds - before.get(pid, (kind, 0.0))[1]
    return spent


def wait_for_batch(query: StreamingQuery, after: int, timeout_s: float = 600) -> dict:
    """The progress of the next micro-batch after batch ``after`` that read records.

    Looks at ``lastProgress`` every 50 ms: ``recentProgress`` would have the JVM turn up to a
    hundred progresses into JSON at every look, which costs more than the micro-batches."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        progress = query.lastProgress
        if progress is not None and progress["batchId"] > after and progress["numInputRows"] > 0:
            return progress
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        time.sleep(0.05)
    raise TimeoutError(f"no micro-batch with records after batch {after} in {timeout_s} s")


def micro_batches(bootstrap: str, batches: int) -> None:
    """The example's streaming job on a trickle: CLICKS_PER_BATCH clicks per micro-batch."""
    ensure_pipeline_topics(bootstrap, "clicks", "click-counts")
    load_before = os.getloadavg()
    started = time.monotonic()
    spark = count_clicks.local_session()
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.monotonic() - started
    with tempfile.TemporaryDirectory() as checkpoint:
        generate_clicks(bootstrap, CLICKS_PER_BATCH, seed=0)
        started = time.monotonic()
        query = count_clicks.count_stream(spark, bootstrap, checkpoint)
        try:
            first = wait_for_batch(query, -1)
            first_s = time.monotonic() - started
            progresses = []
            cpu_before = process_cpu_seconds()
            for seed in range(1, batches + 1):
                generate_clicks(bootstrap, CLICKS_PER_BATCH, seed=seed)
                progresses.append(
                    wait_for_batch(
                        query, progresses[-1]["batchId"] if progresses else first["batchId"]
                    )
                )
            cpu = cpu_per_kind(cpu_before, process_cpu_seconds())
        finally:
            query.stop()
            spark.stop()
    load_after = os.getloadavg()
    print(
        f"micro-batches: examples/count_clicks.py stream, {CLICKS_PER_BATCH} clicks a batch, "
        f"Spark local[2], load average {load_before[0]:.1f} before, {load_after[0]:.1f} after"
    )
    print(f"  session start:                    {session_s:6.1f} s")
    print(
        f"  first counts written after:       {first_s:6.1f} s from the query's start "
        f"(micro-batch 0: {first['durationMs']['triggerExecution'] / 1000:.1f} s)"
    )
    totals = [p["durationMs"]["triggerExecution"] / 1000 for p in progresses]
    print(
        f"  later micro-batches ({len(totals)}):        median {statistics.median(totals):.2f} s, "
        f"min {min(totals):.2f} s, max {max(totals):.2f} s"
    )
    for phase in PHASES:
        times = [p["durationMs"].get(phase, 0) / 1000 for p in progresses]
        print(
            f"    {phase:15s}                  median {statistics.median(times):.2f} s, "
            f"max {max(times):.2f} s"
        )
    for kind, seconds in sorted(cpu.items()):
        print(f"  CPU per micro-batch, {kind + ':':16s} {seconds / batches * 1000:6.0f} ms")


def client_costs(bootstrap: str) -> None:
    """What a task spends on its clients: a new producer per write task against one kept in the
    worker (both idempotent, as the sink's), and opening a consumer per read task."""
    topic = "client-costs"
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    configs = {"bootstrap_servers": bootstrap, **WRITE_DEFAULTS}

    def write_task(producer: Producer) -> None:
        for _ in range(CLICKS_PER_BATCH):
            producer.send(topic, b"v" * VALUE_BYTES)
        producer.flush()

    def new_producer() -> None:
        with Producer(**configs) as producer:
            write_task(producer)

    cache: ClientCache[Producer] = ClientCache()

    def kept_producer() -> None:
        with cache.lend(settings_key(configs), lambda: Producer(**configs)) as producer:
            write_task(producer)

    def new_consumer() -> None:
        tp = TopicPartition(topic, 0)
        with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="none", **READ_DEFAULTS) as c:
            c.assign([tp])
            c.seek(tp, 0)
            while not c.poll(500):
                pass

    kept_producer()  # the first task of a worker opens it
    timings = {name: [] for name in ("new producer", "kept producer", "new consumer")}
    for _ in range(CLIENT_ROUNDS):  # interleaved, so that load changes hit each alike
        for name, task in (
            ("new producer", new_producer),
            ("kept producer", kept_producer),
            ("new consumer", new_consumer),
        ):
            started = time.perf_counter()
            task()
            timings[name].append((time.perf_counter() - started) * 1000)
    cache.close()
    print(f"  a task's clients ({CLIENT_ROUNDS} rounds, interleaved; median, min-max):")
    for name, what in (
        ("new producer", "write task, new producer per task"),
        ("kept producer", "write task, producer kept in the worker"),
        ("new consumer", "read task, opening its consumer"),
    ):
        times = timings[name]
        print(
            f"    {what + ':':42s} {statistics.median(times):6.1f} ms "
            f"({min(times):.1f}-{max(times):.1f})"
        )


# -- first results --------------------------------------------------------------------------------

FIRST_RESULTS_RUN = Path(__file__).resolve().with_name("first_results_run.py")
FIRST_PHASES = (
    ("Python start", "spawned", "interpreter"),
    ("imports (pyspark, odradek)", "interpreter", "imported"),
    ("topics (admin client)", "imported", "topics"),
    ("JVM, SparkSession", "session called", "session returned"),
    ("register the format", "register called", "register returned"),
    ("readStream.load (schema)", "load called", "load returned"),
    ("writeStream.start", "start called", "start returned"),
    ("to micro-batch 0's trigger", "start returned", "trigger started"),
    ("micro-batch 0", "trigger started", "trigger ended"),
    ("to its progress, seen", "trigger ended", "progress seen"),
)
"""Each step from the process's start to the first counts: (name, from mark, to mark)."""
BATCH_PHASES = (
    "latestOffset",
    "queryPlanning",
    "getBatch",
    "addBatch",
    "walCommit",
    "commitOffsets",
)


@dataclass
class SeenProcess:
    """A process seen under a run: what it runs, when it started and when it was last seen
    (both on the monotonic clock)."""

    kind: str
    started: float
    last_seen: float
    cpu_s: float = 0.0


def process_label(command: list[str], parent_label: str | None) -> str:
    """What a process under a run is: the JVM launcher, Spark's JVM, or a Python process with
    the module it runs (and the worker module a daemon forks for; a worker forked from a daemon
    says so)."""
    if not command:
        return "?"
    program = Path(command[0]).name
    if program == "java":
        return "JVM launcher" if "org.apache.spark.launcher.Main" in command else "Spark JVM"
    if program.startswith("python"):
        arguments = command[command.index("-m") :] if "-m" in command else command[1:]
        label = "python " + " ".join(arguments)[:70]
        if parent_label == label and "pyspark.daemon" in arguments:
            return label.replace("python -m pyspark.daemon", "fork of pyspark.daemon")
        return label
    return program


def command_line(pid: int) -> list[str]:
    """The command line of process ``pid``, empty once it is gone."""
    try:
        command = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return []
    return [part.decode(errors="replace") for part in command if part]


def watch_processes(root: int, seen: dict[int, SeenProcess], stop: threading.Event) -> None:
    """Record every process under ``root`` and its CPU time (user + system) every 50 ms until
    ``stop``; start times come from /proc (clock ticks since boot), so only a process shorter
    than 50 ms is missed."""
    tick = os.sysconf("SC_CLK_TCK")
    while not stop.is_set():
        boot_minus_monotonic = time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic()
        parents: dict[int, int] = {}
        started: dict[int, float] = {}
        cpu: dict[int, float] = {}
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid = int(entry.name)
            parents[pid] = int(fields[1])
            started[pid] = int(fields[19]) / tick - boot_minus_monotonic
            cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
        now = time.monotonic()
        for pid, parent in sorted(parents.items(), key=lambda item: started[item[0]]):
            if pid in seen:
                seen[pid].last_seen = now
                seen[pid].cpu_s = cpu[pid]
                if seen[pid].kind in ("bash", "sh", "?"):  # spark-class execs the JVM
                    seen[pid].kind = process_label(command_line(pid), None)
                continue
            ancestor = parent
            while ancestor not in (root, 0, 1) and ancestor in parents:
                ancestor = parents[ancestor]
            if ancestor != root and pid != root:
                continue
            command = command_line(pid)
            parent_seen = seen.get(parent)
            label = process_label(command, parent_seen.kind if parent_seen else None)
            seen[pid] = SeenProcess(label, started[pid], now, cpu[pid])
        stop.wait(0.05)


def first_counts_readable(bootstrap: str, topic: str, stop: threading.Event) -> float | None:
    """When the first record of ``topic`` could be read (monotonic), or None if ``stop`` came
    first."""
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        while not stop.is_set():
            if consumer.poll(100):
                return time.monotonic()
    return None


def first_results_run(bootstrap: str, tree: Path, run: int, workdir: Path) -> dict:
    """Start the example's streaming job from checkout ``tree`` in a fresh process, on fresh
    topics holding CLICKS_PER_BATCH clicks; its marks (seconds after the spawn), the first
    micro-batch's durations and the processes that ran under it."""
    clicks, counts = f"clicks-{run}", f"click-counts-{run}"
    ensure_pipeline_topics(bootstrap, clicks, counts)
    generate_clicks(bootstrap, CLICKS_PER_BATCH, topic=clicks, seed=run)
    rundir = workdir / f"run-{run}"
    rundir.mkdir()
    environment = {**os.environ, "PYTHONPATH": str(tree), "PYSPARK_PYTHON": sys.executable}
    command = [sys.executable, str(FIRST_RESULTS_RUN), str(tree / "examples"), bootstrap]
    command += [clicks, counts, str(rundir / "checkpoint")]
    stop = threading.Event()
    readable: list[float | None] = []
    reader = threading.Thread(
        target=lambda: readable.append(first_counts_readable(bootstrap, counts, stop))
    )
    reader.start()
    seen: dict[int, SeenProcess] = {}
    spawned = time.monotonic()
    with open(rundir / "stderr", "w") as stderr:
        process = subprocess.Popen(
            command, cwd=rundir, env=environment, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    watcher = threading.Thread(target=watch_processes, args=(process.pid, seen, stop))
    watcher.start()
    try:
        assert process.stdout is not None
        output = process.stdout.readline()  # printed once the first counts are written
        cpu_at_first = [(p.kind, p.cpu_s) for p in list(seen.values())]
        process.communicate(timeout=600)
    finally:
        stop.set()
        watcher.join()
        reader.join()
    if process.returncode != 0:
        last_lines = (rundir / "stderr").read_text().splitlines()[-20:]
        raise RuntimeError(f"the run from {tree} failed:\n" + "\n".join(last_lines))
    result = json.loads(output)
    marks = result["marks"]
    marks["trigger ended"] = (
        marks["trigger started"] + result["durationMs"]["triggerExecution"] / 1000
    )
    marks = {name: at - spawned for name, at in marks.items()}
    marks["spawned"] = 0.0
    if readable and readable[0] is not None:
        marks["counts readable"] = readable[0] - spawned
    processes = [
        (p.kind, p.started - spawned, p.last_seen - spawned)
        for p in sorted(seen.values(), key=lambda p: p.started)
    ]
    cpu: dict[str, float] = dict.fromkeys(CPU_GROUPS, 0.0)
    for kind, seconds in cpu_at_first:
        cpu[cpu_group(kind)] += seconds
    return {"marks": marks, "durationMs": result["durationMs"], "processes": processes, "cpu": cpu}


CPU_GROUPS = ("the job's Python process", "Spark's JVM", "Spark's Python workers", "other")


def cpu_group(kind: str) -> str:
    """Which of CPU_GROUPS a process under a run belongs to, by its label."""
    if kind.startswith("python ") and str(FIRST_RESULTS_RUN) in kind:
        return CPU_GROUPS[0]
    if kind in ("Spark JVM", "JVM launcher"):
        return CPU_GROUPS[1]
    if kind.startswith(("python ", "fork of ")):
        return CPU_GROUPS[2]
    return CPU_GROUPS[3]


def first_results(bootstrap: str, baseline: Path | None, rounds: int) -> None:
    """Time the example's streaming job from its process's start to its first counts, phase by
    phase, ``rounds`` times; against ``baseline`` (another checkout) in interleaved runs."""
    here = Path(__file__).resolve().parents[1]
    trees = {"this checkout": here} | ({"baseline": baseline.resolve()} if baseline else {})
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as workdir:
        number = 0
        for round_number in range(rounds):
            order = list(trees) if round_number % 2 == 0 else list(reversed(trees))
            for name in order:
                runs[name].append(first_results_run(bootstrap, trees[name], number, Path(workdir)))
                loads.append(os.getloadavg()[0])
                number += 1
    print(
        f"first results: examples/count_clicks.py stream on {CLICKS_PER_BATCH} clicks, fresh "
        f"process and checkpoint, {rounds} interleaved rounds; load average (1 min) "
        f"{statistics.median(loads):.1f} median, {min(loads):.1f}-{max(loads):.1f}"
    )
    for name, tree in trees.items():
        print(f"  {name}: {tree}")
    print("  seconds, median (min-max)" + "".join(f" | {name:>22s}" for name in trees))

    def row(label: str, values: dict[str, list[float]]) -> None:
        cells = "".join(
            f" | {statistics.median(v):6.2f} ({min(v):5.2f}-{max(v):5.2f})" for v in values.values()
        )
        print(f"  {label:33s}{cells}")

    def span(run: dict, start: str, end: str) -> float:
        return run["marks"][end] - run["marks"][start]

    for label, start, end in FIRST_PHASES:
        row(label, {name: [span(r, start, end) for r in runs[name]] for name in trees})
        if label == "micro-batch 0":
            for phase in BATCH_PHASES:
                row(
                    f"  {phase}",
                    {
                        name: [r["durationMs"].get(phase, 0) / 1000 for r in runs[name]]
                        for name in trees
                    },
                )
    row(
        "total: start to progress seen",
        {n: [span(r, "spawned", "progress seen") for r in runs[n]] for n in trees},
    )
    if all("counts readable" in r["marks"] for rs in runs.values() for r in rs):
        row(
            "start to counts readable",
            {n: [r["marks"]["counts readable"] for r in runs[n]] for n in trees},
        )
    print("  CPU seconds up to the first counts (less moved by the load than the times):")
    for group in CPU_GROUPS:
        row(f"  {group}", {n: [r["cpu"][group] for r in runs[n]] for n in trees})
    row("  all", {n: [sum(r["cpu"].values()) for r in runs[n]] for n in trees})
    for name in trees:
        print(f"  processes under the last run of {name} (started, last seen; s after spawn):")
        for kind, started, last_seen in runs[name][-1]["processes"]:
            print(f"    {started:6.2f} {last_seen:6.2f}  {kind}")


def throughput(bootstrap: str, records: int, partitions: int, master: str, repeat: int) -> None:
    produced = fill(bootstrap, "bench", partitions, records)
    fill(bootstrap, "warm-up", 1, 1000)
    spark = session(master)
    try:
        spark_read(spark, bootstrap, "warm-up", 1000)
        direct = best(repeat, lambda _: consumer_read(bootstrap, "bench", partitions, records))
        read = best(repeat, lambda _: spark_read(spark, bootstrap, "bench", records))
        write = best(repeat, lambda i: spark_write(spark, bootstrap, f"written-{i}", records))
    finally:
        spark.stop()
    print(f"{records:,} records of {VALUE_BYTES} B, {partitions} partitions, Spark {master}")
    print(f"produce (Producer, to fill):   {produced:12,.0f} rows/s")
    print(f"read    (one Consumer):        {direct:12,.0f} rows/s")
    print(
        f"read    (Spark, noop sink):    {read:12,.0f} rows/s  {read / direct:.0%} of the consumer"
    )
    print(f"write   (Spark, odradek sink): {write:12,.0f} rows/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", choices=("all", "throughput", "micro-batches", "first-results"), default="all"
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--micro-batches", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5, help="first results: rounds")
    parser.add_argument("--baseline", type=Path, help="first results: a checkout to compare")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, broker(Path(tmp) / "data") as bootstrap:
        if args.only in ("all", "first-results"):
            first_results(bootstrap, args.baseline, args.rounds)
        if args.only in ("all", "micro-batches"):  # first: its session start is a cold one
            micro_batches(bootstrap, args.micro_batches)
            client_costs(bootstrap)
        if args.only in ("all", "throughput"):
            throughput(bootstrap, args.records, args.partitions, args.master, args.repeat)


if __name__ == "__main__":
    main()
