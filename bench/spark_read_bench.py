"""Spark read throughput: ``pipeline.reader.read_topic`` against a plain ``binaryFile`` read of the same data.

    STRATA_SPARK_JARS_DIR=.cache/jars .venv/bin/python bench/spark_read_bench.py \
        [--mib 256] [--value-bytes 1024] [--partitions 8] [--file-mib 8] [--batch-records 100] \
        [--repeat 3] [--warmup 2] [--backends s3,local] [--decoder jvm|python] [--floor] [--profile] \
        [--breakdown]

The issue's target: Spark read throughput (MiB of log bytes turned into rows) >= 50 % of the raw binaryFile
throughput over the same objects, measured in the same run.

1. Dataset (no HTTP): ``--mib`` MiB of records with ``--value-bytes`` values and 12-byte keys, written the way
   the agent's flusher writes files (``records.encode_batch`` batches of ``--batch-records`` records with
   relative base offsets, one chunk per partition per file, ``fileformat.FileBuilder``, about ``--file-mib``
   MiB per file), over ``--partitions`` partitions of one topic, committed with ``commit_flush`` to one SQLite
   metadata database. Every file is PUT, byte for byte the same, into a moto S3 bucket (moto's
   ThreadedMotoServer in its own process on 127.0.0.1, bench/moto_server.py) and into a local directory
   bucket, so one metadata snapshot serves both.
2. One Spark session, ``pipeline.session.spark_session(master="local[2]", s3_endpoint=...)``. Per backend,
   ``--warmup`` reads of each kind (not measured: JIT, s3a and Python worker start-up), then ``--repeat``
   rounds of
   (a) raw:    spark.read.format("binaryFile").load(paths).select(count(*), sum(length(content))).collect()
   (b) strata: read_topic(spark, metadata, bucket, subscribe=topic).select(count(*), sum(length(value)))
               .collect()    (the driver's metadata snapshot is inside the timing; ``--decoder`` picks the
               JVM decoder, the default, or the Python one)
   in alternating order. Both read exactly the live objects of the snapshot. Each result is checked (file
   count and bytes; record count and value bytes).
3. Figures: MiB/s of log bytes (the objects' bytes, the same numerator for both, so the ratio is the
   inverse ratio of the times), rows/s, strata/raw ratio per round and its median; CPU seconds of the JVM
   (also per thread group: executor tasks, GC, JIT, the py4j thread that plans and compiles the query), of
   the Python workers (pyspark.daemon and its forks) and of moto during each query, from /proc.
4. ``--breakdown``: in this process, without Spark, the executor-side Python work of one strata read split
   into its parts, per file of the local bucket: Arrow content column -> Python bytes (``to_pylist``), CRC
   checks + record decoding (``records.decode_records``), appending to the column lists, building the Arrow
   output columns (``pa.array``) -- against ``pipeline.decode.decode_file`` as a whole.
   ``--profile``: py-spy (``--subprocesses``) on the pyspark daemon during one extra strata read per backend;
   folded stacks in bench/results/, a per-function summary in the JSON. ``--floor`` adds a third query
   to every round: the same binaryFile DataFrame through ``mapInArrow`` with a function that only sums the
   content lengths with pyarrow (no to_pylist, no decoding, one row out per Arrow batch): what any design
   that ships whole objects from the JVM to Python workers costs before decoding a single record.

Every process binds 127.0.0.1 only and is stopped at the end. Results: a table on stdout, JSON in
bench/results/spark_read-<time>.json (ignored by git).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
if str(ROOT) not in sys.path:  # run as a script: make the project importable without installing it
    sys.path.insert(0, str(ROOT))

FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent/strata-bench/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/strata-bench/aws-credentials",
}
MASKED_AWS_ENV = ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")
# Before boto3, Spark (s3a_settings reads the key and secret from the environment) or moto start.
os.environ.update(FAKE_AWS_ENV)
for _name in MASKED_AWS_ENV:
    os.environ.pop(_name, None)
# No console progress bar (it would interleave with the log lines); set before the JVM starts.
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--conf spark.ui.showConsoleProgress=false pyspark-shell")
if "STRATA_SPARK_JARS_DIR" not in os.environ and (ROOT / ".cache" / "jars").is_dir():
    os.environ["STRATA_SPARK_JARS_DIR"] = str(ROOT / ".cache" / "jars")

from storage import fileformat, records  # noqa: E402
from storage.clock import SystemClock  # noqa: E402
from storage.keys import new_object_key  # noqa: E402
from storage.metadata import LEVEL_INGEST, NewChunk, NewFile, open_metadata_store  # noqa: E402
from storage.objectstore import open_object_store  # noqa: E402

MiB = 1024 * 1024
RESULTS_DIR = BENCH_DIR / "results"
PYTHON = sys.executable
PY_SPY = Path(PYTHON).with_name("py-spy")
TOPIC = "bench-read"
BUCKET = "strata-spark-bench"
CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGET_RATIO = 0.50
START_TIMEOUT_S = 60.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- /proc accounting -------------------------------------------------------------------------------------
def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, utime + stime + cutime + cstime in seconds) of a process, None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), sum(int(x) for x in fields[11:15]) / CLK_TCK


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def system_busy_s() -> float:
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(parts[:8]) - parts[3] - parts[4]) / CLK_TCK


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def process_tree_cpu(root: int, exclude: set[int]) -> dict[str, float]:
    """CPU seconds (own + reaped children) of ``root``'s descendants: the JVM, and the Python processes.

    A dead process's time is in its parent's cutime/cstime once reaped, so summing utime+stime+cutime+cstime
    over the living processes counts every CPU second once (pyspark workers are reaped by the daemon).
    """
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        st = _stat(int(entry))
        if st is not None:
            parents[int(entry)], cpu[int(entry)] = st
    out = {"jvm": 0.0, "python_workers": 0.0}
    for pid in cpu:
        p, inside = pid, False
        while p > 1:
            p = parents.get(p, 0)
            if p in exclude:
                break
            if p == root:
                inside = True
                break
        if not inside or pid in exclude:
            continue
        out["jvm" if "java" in _comm(pid).split(" ", 1)[0] else "python_workers"] += cpu[pid]
    return out


# JVM threads by name (/proc/PID/task/TID/comm, 15 characters): where the JVM's CPU goes.
JVM_THREAD_GROUPS = (
    ("gc", re.compile(r"^(GC Thread|G1 |VM Thread|VM Periodic)")),
    ("jit", re.compile(r"^C[12] Compiler")),
    ("executor tasks", re.compile(r"^Executor task")),
    ("python i/o threads", re.compile(r"(?i)python|stdout writ|stdin writ|writer for")),
    ("driver: py4j (planning, codegen)", re.compile(r"^Thread-\d+$")),
)


def jvm_threads_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of the JVM's living threads, grouped by JVM_THREAD_GROUPS; 'exited' = the rest."""
    out = {name: 0.0 for name, _ in JVM_THREAD_GROUPS}
    out["other threads"] = 0.0
    task_dir = Path(f"/proc/{pid}/task")
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return out
    for tid in tids:
        try:
            comm = (task_dir / tid / "comm").read_text().strip()
            fields = (task_dir / tid / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / CLK_TCK
        group = next((name for name, pattern in JVM_THREAD_GROUPS if pattern.search(comm)), "other threads")
        out[group] += seconds
    st = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    out["exited threads"] = max(0.0, (int(st[11]) + int(st[12])) / CLK_TCK - sum(out.values()))
    return out


class CpuMeter:
    """CPU seconds of the Spark JVM (by thread group), the Python workers, moto and the machine."""

    def __init__(self, moto_pid: int | None) -> None:
        self.moto_pid = moto_pid
        self.jvm: int | None = None

    def read(self) -> dict[str, float]:
        exclude = {self.moto_pid} if self.moto_pid else set()
        out = process_tree_cpu(os.getpid(), exclude)
        st = _stat(self.moto_pid) if self.moto_pid else None
        out["moto"] = st[1] if st else 0.0
        out["driver"] = sum(os.times()[:2])
        out["system"] = system_busy_s()
        if self.jvm is None:
            self.jvm = jvm_pid()
        if self.jvm is not None:
            out.update({f"jvm: {k}": v for k, v in jvm_threads_cpu(self.jvm).items()})
        out["wall"] = time.perf_counter()
        return out

    @contextlib.contextmanager
    def measure(self, into: dict[str, Any]) -> Iterator[None]:
        before = self.read()
        yield
        after = self.read()
        wall = after["wall"] - before["wall"]
        into["wall_s"] = round(wall, 3)
        cpu = {k: round(after[k] - before.get(k, 0.0), 2) for k in after if k != "wall"}
        top = {k: v for k, v in cpu.items() if not k.startswith("jvm: ") and k != "system"}
        cpu["other"] = round(max(0.0, cpu["system"] - sum(top.values())), 2)
        into["cpu_s"] = cpu


# --- moto -------------------------------------------------------------------------------------------------
class Moto:
    def __init__(self, workdir: Path) -> None:
        self.log = (workdir / "moto.log").open("w")
        self.proc = subprocess.Popen(
            [PYTHON, str(BENCH_DIR / "moto_server.py"), BUCKET],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            cwd=ROOT,
        )
        ready: list[str] = []
        assert self.proc.stdout is not None
        stdout = self.proc.stdout
        reader = threading.Thread(target=lambda: ready.append(stdout.readline().decode()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        if not ready or not ready[0].startswith("http://127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"moto did not start: {(workdir / 'moto.log').read_text()[-2000:]}")
        self.endpoint = ready[0].strip()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)
        self.log.close()


# --- dataset ----------------------------------------------------------------------------------------------
def generate(args: argparse.Namespace, workdir: Path, endpoint: str | None) -> dict[str, Any]:
    """Write the files into the local bucket (and the S3 bucket) and commit them to one SQLite database."""
    clock = SystemClock()
    rng = random.Random(args.seed)
    meta = open_metadata_store(f"sqlite:///{workdir / 'metadata.db'}")
    stores = [open_object_store(f"file://{workdir / 'bucket'}", retry=None)]
    if endpoint is not None:
        stores.append(
            open_object_store(f"s3://{BUCKET}", endpoint_url=endpoint, region="us-east-1", retry=None)
        )
    meta.create_topic(TOPIC, args.partitions, {}, clock.now_ms())
    pool = bytes(rng.randrange(32, 127) for _ in range(1 << 16))
    vb = args.value_bytes
    record_bytes = vb + 12 + 12  # value, key, per-record framing (approximate, to size the chunks)
    per_chunk = max(args.batch_records, args.file_mib * MiB // args.partitions // record_bytes)
    per_chunk -= per_chunk % args.batch_records
    target = args.mib * MiB
    ts0 = clock.now_ms() - 3_600_000
    n = files = file_bytes = chunk_bytes = value_bytes = 0
    started = time.perf_counter()
    while chunk_bytes < target:
        builder = fileformat.FileBuilder()
        chunks: list[NewChunk] = []
        for p in range(args.partitions):
            buf = bytearray()
            count = 0
            first_ts = ts0 + n // 1000
            while count < per_chunk:
                recs = []
                for j in range(args.batch_records):
                    at = (n * 131) % (len(pool) - vb)
                    recs.append(
                        records.Record(
                            count + j, ts0 + n // 1000, b"key-%08d" % (n % 100_000), pool[at : at + vb]
                        )
                    )
                    n += 1
                buf += records.encode_batch(recs, count)
                count += len(recs)
                value_bytes += vb * len(recs)
            last_ts = ts0 + (n - 1) // 1000
            m = builder.add_chunk(
                TOPIC,
                p,
                buf,
                record_count=count,
                last_offset_delta=count - 1,
                min_timestamp=first_ts,
                max_timestamp=last_ts,
            )
            chunks.append(NewChunk(TOPIC, p, count, m.position, m.length, first_ts, last_ts, m.crc))
            chunk_bytes += len(buf)
        data = builder.finish()
        key = new_object_key(LEVEL_INGEST, clock, rng)
        for store in stores:
            store.put(key, data)
        meta.commit_flush(NewFile(key, len(data), LEVEL_INGEST, clock.now_ms()), chunks, [], clock.now_ms())
        files += 1
        file_bytes += len(data)
    for store in stores:
        store.close()
    meta.close()
    return {
        "files": files,
        "file_bytes": file_bytes,
        "chunk_bytes": chunk_bytes,
        "records": n,
        "value_bytes": value_bytes,
        "records_per_chunk": per_chunk,
        "batch_records": args.batch_records,
        "partitions": args.partitions,
        "generate_s": round(time.perf_counter() - started, 1),
    }


# --- the two reads ----------------------------------------------------------------------------------------
def make_queries(
    spark: Any, metadata_url: str, bucket_url: str, floor: bool, decoder: str = "jvm"
) -> dict[str, Callable[[], tuple[int, int]]]:
    from pyspark.sql import functions as F

    from pipeline.options import parse_options
    from pipeline.reader import object_url, read_topic
    from pipeline.snapshot import take_snapshot

    meta = open_metadata_store(metadata_url)
    try:
        keys = take_snapshot(meta, parse_options({"subscribe": TOPIC})).object_keys
    finally:
        meta.close()
    paths = [object_url(bucket_url, key) for key in keys]

    def raw() -> tuple[int, int]:
        df = spark.read.format("binaryFile").load(paths)
        row = df.select(F.count("*"), F.sum(F.length("content"))).collect()[0]
        return int(row[0]), int(row[1])

    def strata() -> tuple[int, int]:
        df = read_topic(spark, metadata_url, bucket_url, decoder=decoder, subscribe=TOPIC)
        row = df.select(F.count("*"), F.sum(F.length("value"))).collect()[0]
        return int(row[0]), int(row[1])

    def content_lengths(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        for batch in batches:
            total = pc.sum(pc.binary_length(batch.column("content"))).as_py() or 0
            yield pa.RecordBatch.from_pydict({"n": pa.array([total], pa.int64())})

    def transfer_floor() -> tuple[int, int]:
        df = spark.read.format("binaryFile").load(paths).select("path", "content")
        row = df.mapInArrow(content_lengths, "n long").select(F.count("*"), F.sum("n")).collect()[0]
        return -1, int(row[1])  # one row per Arrow batch: only the bytes are checked

    queries = {"raw": raw, "strata": strata}
    if floor:
        queries["floor"] = transfer_floor
    return queries


def scan_tasks(spark: Any, metadata_url: str, bucket_url: str) -> int:
    """How many tasks (input partitions) Spark makes of the binaryFile scan of the snapshot's objects."""
    from pipeline.options import parse_options
    from pipeline.reader import object_url
    from pipeline.snapshot import take_snapshot

    meta = open_metadata_store(metadata_url)
    try:
        keys = take_snapshot(meta, parse_options({"subscribe": TOPIC})).object_keys
    finally:
        meta.close()
    paths = [object_url(bucket_url, key) for key in keys]
    return int(spark.read.format("binaryFile").load(paths).rdd.getNumPartitions())


def run_backend(
    args: argparse.Namespace,
    spark: Any,
    backend: str,
    bucket_url: str,
    metadata_url: str,
    dataset: dict[str, Any],
    meter: CpuMeter,
    stamp: str,
) -> dict[str, Any]:
    queries = make_queries(spark, metadata_url, bucket_url, args.floor, args.decoder)
    expected = {
        "raw": (dataset["files"], dataset["file_bytes"]),
        "strata": (dataset["records"], dataset["value_bytes"]),
        "floor": (-1, dataset["file_bytes"]),
    }
    out: dict[str, Any] = {"bucket_url": bucket_url, "warmup": {}, "rounds": []}
    out["scan_tasks"] = scan_tasks(spark, metadata_url, bucket_url)
    for i in range(args.warmup):
        for name, query in queries.items():
            entry: dict[str, Any] = {}
            with meter.measure(entry):
                got = query()
            if got != expected[name]:
                raise RuntimeError(f"{backend} {name}: got {got}, expected {expected[name]}")
            out["warmup"][f"{name}-{i}"] = entry
            log(f"  [{backend}] warm-up {name}: {entry['wall_s']} s")
    mib = dataset["file_bytes"] / MiB
    for rnd in range(args.repeat):
        order = [name for name in queries if name != "floor"]
        order = order if rnd % 2 == 0 else order[::-1]
        if "floor" in queries:
            order.insert(1, "floor")
        result: dict[str, Any] = {"round": rnd, "order": order}
        for name in order:
            entry = {}
            with meter.measure(entry):
                got = queries[name]()
            if got != expected[name]:
                raise RuntimeError(f"{backend} {name}: got {got}, expected {expected[name]}")
            entry["mib_s"] = round(mib / entry["wall_s"], 1)
            entry["rows_s"] = round(got[0] / entry["wall_s"])
            result[name] = entry
        result["ratio"] = round(result["strata"]["mib_s"] / result["raw"]["mib_s"], 3)
        if "floor" in result:
            result["floor_ratio"] = round(result["floor"]["mib_s"] / result["raw"]["mib_s"], 3)
        out["rounds"].append(result)
        log(
            f"  [{backend}] round {rnd}: raw {result['raw']['mib_s']} MiB/s ({result['raw']['wall_s']} s), "
            f"strata {result['strata']['mib_s']} MiB/s ({result['strata']['wall_s']} s, "
            f"{result['strata']['rows_s']:,} rows/s): {result['ratio']:.0%}; "
            f"cpu raw {result['raw']['cpu_s']} strata {result['strata']['cpu_s']}"
        )
    ratios = sorted(r["ratio"] for r in out["rounds"])
    out["ratio_median"] = ratios[len(ratios) // 2]
    for name in queries:
        walls = sorted(r[name]["wall_s"] for r in out["rounds"])
        med = walls[len(walls) // 2]
        out[f"{name}_wall_median_s"] = med
        out[f"{name}_mib_s_median"] = round(mib / med, 1)
        out[f"{name}_mib_s_range"] = [round(mib / walls[-1], 1), round(mib / walls[0], 1)]
        cpu = [r[name]["cpu_s"] for r in out["rounds"]]
        out[f"{name}_cpu_s_mean"] = {k: round(sum(c[k] for c in cpu) / len(cpu), 2) for k in cpu[0]}
    out["strata_rows_s_median"] = round(dataset["records"] / out["strata_wall_median_s"])
    if "floor" in queries:
        floors = sorted(r["floor_ratio"] for r in out["rounds"])
        out["floor_ratio_median"] = floors[len(floors) // 2]
    if args.profile:
        out["profile"] = profile_strata(spark, queries["strata"], backend, stamp)
    return out


# --- profiles ---------------------------------------------------------------------------------------------
def pyspark_daemons() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and "pyspark.daemon" in _comm(int(entry)):
            st = _stat(int(entry))
            # the daemon itself, not its forked workers (whose parent is a daemon)
            if st is not None and "pyspark.daemon" not in _comm(st[0]):
                pids.append(int(entry))
    return pids


def profile_strata(
    spark: Any, query: Callable[[], tuple[int, int]], backend: str, stamp: str
) -> dict[str, Any]:
    daemons = pyspark_daemons()
    if not PY_SPY.exists() or not daemons:
        return {"error": f"py-spy at {PY_SPY} or a pyspark daemon ({daemons}) missing"}
    folded = RESULTS_DIR / f"spark_read-{stamp}-{backend}.folded"
    cmd = [str(PY_SPY), "record", "--pid", str(daemons[0]), "--subprocesses", "--format", "raw"]
    cmd += ["--rate", "200", "-o", str(folded)]
    spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.5)  # let py-spy attach
    started = time.perf_counter()
    try:
        query()
    finally:
        wall = time.perf_counter() - started
        time.sleep(0.5)
        spy.send_signal(signal.SIGINT)
        try:
            _, err = spy.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            spy.kill()
            _, err = spy.communicate()
    if not folded.exists():
        return {"error": f"py-spy wrote nothing: {err.decode(errors='replace')[-1000:]}"}
    return {"folded": str(folded.relative_to(ROOT)), "wall_s": round(wall, 2), **summarize_folded(folded)}


# Where an executor's Python time goes: the first frame, from the leaf up, that names a category. py-spy
# shows no native frames, so C work (to_pylist, pa.array) is the self time of the Python line calling it.
def _decode_file_arrow_lines() -> range:
    """Lines of pipeline/decode.py from the first ``pa.array(`` on: building the output columns."""
    lines = (ROOT / "pipeline" / "decode.py").read_text().splitlines()
    first = next(i for i, line in enumerate(lines, 1) if "pa.array(" in line and "def " not in line)
    return range(first - 1, len(lines) + 1)


_TO_PYLIST_LINES = {
    i
    for i, line in enumerate((ROOT / "pipeline" / "reader.py").read_text().splitlines(), 1)
    if "to_pylist" in line
}


def _category(frame: str, arrow_lines: range) -> str | None:
    if "(storage/records.py" in frame or frame.startswith("__create_fn__"):
        return "decode records (storage/records.py, Record objects)"
    if frame.startswith(("verify_chunk ", "crc32c")):
        return "CRC-32C of chunks (verify_chunk)"
    m = re.match(r"decode_file \(pipeline/decode\.py:(\d+)\)", frame)
    if m:
        if int(m.group(1)) in arrow_lines:
            return "output columns: pa.array + RecordBatch (decode.py)"
        return "filter + append to column lists (decode.py loop)"
    m = re.match(r"read_snapshot\.<locals>\.decode \(pipeline/reader\.py:(\d+)\)", frame)
    if m:
        if int(m.group(1)) in _TO_PYLIST_LINES:
            return "input: path + content columns to Python objects (to_pylist, reader.py)"
        return "reader.py decode loop (object key, dispatch)"
    if re.match(r"(ArrowStreamSerializer\.load_stream|read_int|RecordBatchStreamReader|_read_)", frame):
        return "Arrow IPC in from the JVM (pyspark serializers)"
    if re.match(
        r"(ArrowStreamSerializer\.dump_stream|_write_stream_start|write_int|RecordBatchStreamWriter)", frame
    ):
        return "Arrow IPC out to the JVM (pyspark serializers)"
    return None


def summarize_folded(path: Path, top: int = 20) -> dict[str, Any]:
    """Shares of the Python workers' samples (the daemon's own loop left out) by category and function."""
    arrow_lines = _decode_file_arrow_lines()
    own: Counter[str] = Counter()
    own_lines: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    cats: Counter[str] = Counter()
    total = daemon = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        raw = stack.split(";")
        if not any(f.startswith("worker (daemon.py") for f in raw):
            daemon += n  # the daemon's accept loop, not a worker running a task
            continue
        total += n
        merged = [re.sub(r":\d+\)$", ")", f) for f in raw]
        own[merged[-1]] += n
        own_lines[raw[-1]] += n
        for frame in set(merged):
            incl[frame] += n
        category = "pyspark worker loop and other"
        for frame in reversed(raw):
            hit = _category(frame, arrow_lines)
            if hit is not None:
                category = hit
                break
        cats[category] += n

    def share(c: Counter[str]) -> list[tuple[str, float]]:
        return [(f, round(100 * n / total, 1)) for f, n in c.most_common(top)] if total else []

    return {
        "worker_samples": total,
        "daemon_samples": daemon,
        "categories": share(cats),
        "self": share(own),
        "self_lines": share(own_lines),
        "inclusive": share(incl),
    }


# --- JVM profile (Java Flight Recorder) -------------------------------------------------------------------
def jvm_pid() -> int | None:
    """The Spark JVM started by this process (a descendant whose command is java)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or not _comm(int(entry)).split(" ", 1)[0].endswith("java"):
            continue
        p = int(entry)
        while p > 1:
            st = _stat(p)
            if st is None:
                break
            p = st[0]
            if p == me:
                return int(entry)
    return None


# --- breakdown of the executor's Python work, without Spark -----------------------------------------------
def breakdown(workdir: Path, dataset: dict[str, Any]) -> dict[str, Any]:
    """Time the parts of ``pipeline.decode.decode_file`` on every file of the local bucket, here (one core).

    Each part runs on its own over all files, so that no part holds the others' objects (which would
    make the garbage collector walk them): converting the content column to Python bytes; CRC checks
    (chunk CRC + batch CRCs, as decode_file does them); decoding every record into ``Record`` objects
    (``records.decode_records``, objects dropped at once); building the seven output columns from
    ready-made lists (``pa.array`` + ``RecordBatch``); and ``decode_file`` as a whole. What is left of the
    whole after the parts is decode_file's own loop: the offset filter and the seven list appends per row.
    """
    import pyarrow as pa

    from pipeline.decode import arrow_schema, decode_file
    from pipeline.options import parse_options
    from pipeline.snapshot import take_snapshot

    meta = open_metadata_store(f"sqlite:///{workdir / 'metadata.db'}")
    try:
        snapshot = take_snapshot(meta, parse_options({"subscribe": TOPIC}))
    finally:
        meta.close()
    keys = snapshot.object_keys
    column = pa.array([(workdir / "bucket" / key).read_bytes() for key in keys], pa.binary())
    times: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.process_time()
        value = fn()
        times[name] = time.process_time() - t0
        return value

    contents: list[bytes] = timed("input: content column to_pylist", column.to_pylist)
    files = [(content, snapshot.tasks[key]) for key, content in zip(keys, contents, strict=True)]

    def crc() -> None:
        for content, tasks in files:
            for task in tasks:
                data = memoryview(content)[task.position : task.position + task.length]
                fileformat.verify_chunk(data, task.crc)
                for _ in records.iter_batches(data, verify_crc=True):
                    pass

    def decode() -> int:
        n = 0
        for content, tasks in files:
            for task in tasks:
                data = memoryview(content)[task.position : task.position + task.length]
                for _header, batch in records.iter_batches(data, verify_crc=False):
                    for _record in records.decode_records(
                        batch, offset_base=task.base_offset, verify_crc=False
                    ):
                        n += 1
        return n

    def whole() -> int:
        return sum(decode_file(content, tasks, False).num_rows for content, tasks in files)

    timed("CRC-32C: chunk + batch CRCs", crc)
    rows = timed("decode_records: Record objects", decode)
    # Output columns from ready-made lists of one file's worth of rows at a time, as decode_file does.
    types = [f.type for f in arrow_schema(False)]
    per_file = rows // max(1, len(files))
    value = bytes(dataset["value_bytes"] // dataset["records"])
    lists = [
        [b"key-00000000"] * per_file,
        [value] * per_file,
        [TOPIC] * per_file,
        [0] * per_file,
        list(range(per_file)),
        [1_700_000_000_000_000] * per_file,
        [0] * per_file,
    ]

    def build() -> None:
        for _ in files:
            arrays = [pa.array(c, ty) for c, ty in zip(lists, types, strict=True)]
            pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(False))

    timed("output columns: pa.array x 7 + RecordBatch", build)
    total_rows = timed("decode_file as a whole", whole)
    parts = (
        "CRC-32C: chunk + batch CRCs",
        "decode_records: Record objects",
        "output columns: pa.array x 7 + RecordBatch",
    )
    times["decode_file own loop: filter + 7 appends (whole - parts)"] = max(
        0.0, times["decode_file as a whole"] - sum(times[p] for p in parts)
    )
    mib = dataset["file_bytes"] / MiB
    whole_s = times["decode_file as a whole"]
    return {
        "rows": total_rows,
        "cpu_s": {k: round(v, 3) for k, v in times.items()},
        "ms_per_mib": {k: round(1000 * v / mib, 2) for k, v in times.items()},
        "us_per_row": {k: round(1e6 * v / total_rows, 3) for k, v in times.items()},
        "share_of_decode_file": {
            k: round(100 * v / whole_s, 1) for k, v in times.items() if k != "decode_file as a whole"
        },
        "python_mib_s_per_core": round(mib / whole_s, 1),
    }


# --- report -----------------------------------------------------------------------------------------------
def code_fingerprint() -> str:
    """sha256 of what a Spark read runs (pipeline/, storage/), to tie figures to a state of the tree."""
    import hashlib

    digest = hashlib.sha256()
    for package in ("pipeline", "storage"):
        for path in sorted((ROOT / package).rglob("*.py")):
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def machine_info() -> dict[str, Any]:
    import pyarrow
    import pyspark

    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "pyarrow": pyarrow.__version__,
        "java": java.splitlines()[0] if java else "?",
        "loadavg_at_start": loadavg(),
    }


def print_report(report: dict[str, Any]) -> None:
    ds = report["dataset"]
    print(
        f"\ndataset: {ds['records']:,} records, {ds['file_bytes'] / MiB:.1f} MiB in {ds['files']} files "
        f"({ds['partitions']} partitions, {ds['records_per_chunk']} records per chunk, "
        f"{ds['batch_records']} per batch)\n"
    )
    print(
        "| backend | raw binaryFile MiB/s | strata MiB/s | strata rows/s | strata / raw (median) "
        "| per round |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for backend, r in report["backends"].items():
        verdict = "pass" if r["ratio_median"] >= TARGET_RATIO else "MISS"
        print(
            f"| {backend} | {r['raw_mib_s_median']} ({r['raw_mib_s_range'][0]}-{r['raw_mib_s_range'][1]}) | "
            f"{r['strata_mib_s_median']} ({r['strata_mib_s_range'][0]}-{r['strata_mib_s_range'][1]}) | "
            f"{r['strata_rows_s_median']:,} | {r['ratio_median']:.0%} (>= 50 %: {verdict}) | "
            f"{', '.join(format(x['ratio'], '.0%') for x in r['rounds'])} |"
        )
    for backend, r in report["backends"].items():
        if "floor_ratio_median" in r:
            print(
                f"\n{backend}: transfer floor (binaryFile -> mapInArrow, no decoding) "
                f"{r['floor_mib_s_median']} MiB/s = {r['floor_ratio_median']:.0%} of raw"
            )
    print("\nmean CPU seconds per query (jvm / python workers / moto / other):")
    for backend, r in report["backends"].items():
        for name in ("raw", "floor", "strata"):
            if f"{name}_cpu_s_mean" not in r:
                continue
            c = r[f"{name}_cpu_s_mean"]
            print(
                f"  {backend} {name}: {c['jvm']} / {c['python_workers']} / {c['moto']} / {c['other']} "
                f"(wall {r[f'{name}_wall_median_s']} s)"
            )
    print("\nmean JVM CPU seconds per query by thread group:")
    for backend, r in report["backends"].items():
        for name in ("raw", "floor", "strata"):
            if f"{name}_cpu_s_mean" not in r:
                continue
            c = r[f"{name}_cpu_s_mean"]
            groups = ", ".join(f"{k[5:]} {v}" for k, v in c.items() if k.startswith("jvm: "))
            print(f"  {backend} {name}: {groups}")
    if "breakdown" in report:
        b = report["breakdown"]
        print(f"\nexecutor Python work, without Spark ({b['rows']:,} rows):")
        for k, v in b["ms_per_mib"].items():
            share = b["share_of_decode_file"].get(k)
            print(
                f"  {k}: {v} ms/MiB, {b['us_per_row'][k]} us/row"
                + (f", {share} % of decode_file" if share else "")
            )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=int, default=256, help="MiB of chunk data to write")
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--file-mib", type=int, default=8, help="about this many MiB per file")
    parser.add_argument("--batch-records", type=int, default=100, help="records per RecordBatch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured reads of each kind first (JIT)")
    parser.add_argument("--backends", default="s3,local")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="py-spy the Python workers in one more read")
    parser.add_argument("--breakdown", action="store_true", help="time decode_file's parts without Spark")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time the transfer floor: binaryFile -> mapInArrow with no decoding (sums content lengths)",
    )
    parser.add_argument(
        "--decoder",
        choices=("jvm", "python"),
        default="jvm",
        help="read_topic's decoder: the Java source (default) or the Python workers (mapInArrow)",
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        help="extra Spark setting key=value (an experiment, not default)",
    )
    parser.add_argument("--tag", default="")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    args.backends = [b for b in args.backends.split(",") if b]
    if not set(args.backends) <= {"s3", "local"}:
        parser.error("--backends takes s3 and/or local")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    RESULTS_DIR.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    workdir = Path(tempfile.mkdtemp(prefix="strata-spark-bench-"))
    report: dict[str, Any] = {
        "command": " ".join([".venv/bin/python", "bench/spark_read_bench.py", *(argv or sys.argv[1:])]),
        "started": stamp,
        "machine": machine_info(),
        "code_sha256": code_fingerprint(),
        "params": vars(args),
        "backends": {},
    }
    moto: Moto | None = None
    spark = None
    try:
        if "s3" in args.backends:
            moto = Moto(workdir)
            log(f"moto S3 at {moto.endpoint} (pid {moto.pid})")
        log(f"writing {args.mib} MiB of {args.value_bytes}-byte records")
        report["dataset"] = dataset = generate(args, workdir, moto.endpoint if moto else None)
        log(
            f"  {dataset['files']} files, {dataset['file_bytes'] / MiB:.1f} MiB, "
            f"{dataset['records']:,} records in {dataset['generate_s']} s"
        )
        if args.breakdown:
            log("breakdown of the executor's Python work (no Spark)")
            report["breakdown"] = breakdown(workdir, dataset)
        from pipeline.session import spark_session

        started = time.perf_counter()
        spark = spark_session(
            master=args.master,
            app_name="strata-spark-read-bench",
            s3_endpoint=moto.endpoint if moto else None,
            s3_region="us-east-1",
        )
        for setting in args.conf:
            k, _, v = setting.partition("=")
            spark.conf.set(k, v)
        spark.sparkContext.setLogLevel("ERROR")
        report["spark_start_s"] = round(time.perf_counter() - started, 1)
        report["spark_conf"] = {
            k: spark.conf.get(k)
            for k in (
                "spark.sql.files.maxPartitionBytes",
                "spark.sql.files.openCostInBytes",
                "spark.sql.execution.arrow.maxRecordsPerBatch",
                "spark.default.parallelism",
            )
            if spark.conf.get(k, None) is not None
        }
        meter = CpuMeter(moto.pid if moto else None)
        metadata_url = f"sqlite:///{workdir / 'metadata.db'}"
        for backend in args.backends:
            bucket_url = f"s3://{BUCKET}" if backend == "s3" else f"file://{workdir / 'bucket'}"
            log(f"[{backend}] {bucket_url}")
            report["backends"][backend] = run_backend(
                args, spark, backend, bucket_url, metadata_url, dataset, meter, stamp
            )
    finally:
        if spark is not None:
            spark.stop()
        if moto is not None:
            moto.stop()
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        report["loadavg_at_end"] = loadavg()
        tag = f"-{args.tag}" if args.tag else ""
        out = RESULTS_DIR / f"spark_read-{stamp}{tag}.json"
        out.write_text(json.dumps(report, indent=1, default=str))
        log(f"results: {out.relative_to(ROOT)}")
    print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
