"""Profiles of the Spark read (bench.spark_read_bench --profile, --breakdown): where the executor's
Python time goes.

``--profile`` runs py-spy (``--subprocesses``) on the pyspark daemon during one extra strata read and
sums its samples by category: the first frame, from the leaf up, that names one. py-spy shows no native
frames, so C work (to_pylist, pa.array) is the self time of the Python line calling it. ``--breakdown``
times the parts of ``pipeline.decode.decode_file`` in this process, without Spark.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import RESULTS_DIR, ROOT, MiB
from bench.pyspy_top import folded, function_of, shares
from bench.spark_cpu import pyspark_daemons
from pipeline.snapshot import ChunkTask
from storage import fileformat, records
from storage.metadata import open_metadata_store

PY_SPY = Path(sys.executable).with_name("py-spy")
TOPIC = "bench-read"


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
    for raw, n in folded(path):
        if not any(f.startswith("worker (daemon.py") for f in raw):
            daemon += n  # the daemon's accept loop, not a worker running a task
            continue
        total += n
        merged = [function_of(f) for f in raw]
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
        return shares(c, total, top)

    return {
        "worker_samples": total,
        "daemon_samples": daemon,
        "categories": share(cats),
        "self": share(own),
        "self_lines": share(own_lines),
        "inclusive": share(incl),
    }


Files = list[tuple[bytes, tuple[ChunkTask, ...]]]  # (object bytes, its chunk tasks) per file


def _crc(files: Files) -> None:
    for content, tasks in files:
        for task in tasks:
            data = memoryview(content)[task.position : task.position + task.length]
            fileformat.verify_chunk(data, task.crc)
            for _ in records.iter_batches(data, verify_crc=True):
                pass


def _decode(files: Files) -> int:
    n = 0
    for content, tasks in files:
        for task in tasks:
            data = memoryview(content)[task.position : task.position + task.length]
            for _header, batch in records.iter_batches(data, verify_crc=False):
                for _record in records.decode_records(batch, offset_base=task.base_offset, verify_crc=False):
                    n += 1
    return n


def _build(files: Files, rows: int, value_bytes: int) -> None:
    """Output columns from ready-made lists of one file's worth of rows at a time, as decode_file does."""
    import pyarrow as pa

    from pipeline.decode import arrow_schema

    types = [f.type for f in arrow_schema(False)]
    per_file = rows // max(1, len(files))
    value = bytes(value_bytes)
    lists = [
        [b"key-00000000"] * per_file,
        [value] * per_file,
        [TOPIC] * per_file,
        [0] * per_file,
        list(range(per_file)),
        [1_700_000_000_000_000] * per_file,
        [0] * per_file,
    ]
    for _ in files:
        arrays = [pa.array(c, ty) for c, ty in zip(lists, types, strict=True)]
        pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(False))


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

    from pipeline.decode import decode_file
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
    timed("CRC-32C: chunk + batch CRCs", lambda: _crc(files))
    rows = timed("decode_records: Record objects", lambda: _decode(files))
    value_bytes = dataset["value_bytes"] // dataset["records"]
    timed("output columns: pa.array x 7 + RecordBatch", lambda: _build(files, rows, value_bytes))
    total_rows = timed(
        "decode_file as a whole", lambda: sum(decode_file(c, t, False).num_rows for c, t in files)
    )
    return breakdown_figures(times, total_rows, dataset["file_bytes"] / MiB)


def breakdown_figures(times: dict[str, float], rows: int, mib: float) -> dict[str, Any]:
    parts = (
        "CRC-32C: chunk + batch CRCs",
        "decode_records: Record objects",
        "output columns: pa.array x 7 + RecordBatch",
    )
    whole_s = times["decode_file as a whole"]
    times["decode_file own loop: filter + 7 appends (whole - parts)"] = max(
        0.0, whole_s - sum(times[p] for p in parts)
    )
    return {
        "rows": rows,
        "cpu_s": {k: round(v, 3) for k, v in times.items()},
        "ms_per_mib": {k: round(1000 * v / mib, 2) for k, v in times.items()},
        "us_per_row": {k: round(1e6 * v / rows, 3) for k, v in times.items()},
        "share_of_decode_file": {
            k: round(100 * v / whole_s, 1) for k, v in times.items() if k != "decode_file as a whole"
        },
        "python_mib_s_per_core": round(mib / whole_s, 1),
    }
