"""The JVM decoder (pipeline/jvm, ``read_topic``'s default) held to the Python decoder (pipeline/decode.py).

- Through Spark: the same topics read with ``decoder="jvm"`` and ``decoder="python"`` give identical rows
  (every codec, headers on and off, a compacted topic with holes, several partitions, offset ranges, and
  batches only other Kafka clients write); a corrupt chunk and a decompression bomb fail both, the JVM with
  the Python error's code, wording and the object key.
- Without Spark, through ``strata.spark.DecodeTool`` (the executor's reader on the local filesystem): random
  files, many of them broken, give the Python decoder's rows or its error, and nothing else.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pipeline import jars
from pipeline.decode import decode_file
from pipeline.options import InvalidReadOption
from pipeline.reader import object_location, object_url, read_topic
from pipeline.session import require_java
from pipeline.snapshot import ChunkTask
from pipeline.tasklist import HEADER, encode_tasks
from planner.round import CompactionRound
from storage import records
from storage.errors import CodecError, SettingsError, SparkSetupError
from storage.metadata.txn_state import AbortedTxn
from tests.fixtures.server import local_settings, run_server
from tests.spark.batches import (
    KINDS,
    LOG_APPEND_TIME,
    TRANSACTIONAL,
    Chunk,
    batch,
    bomb,
    commit_files,
    fix_crc,
)

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000
# Produced through a server: recent enough that the default 7-day retention keeps everything.
RECENT = int(time.time() * 1000) - 3_600_000
LIMIT = 64 << 20  # compression.output_limit of a small batch


def _rows(
    spark: Any, metadata_url: str, bucket_url: str, decoder: str, **options: Any
) -> list[tuple[Any, ...]]:
    df = read_topic(spark, metadata_url, bucket_url, decoder=decoder, **options)
    with_headers = "headers" in df.columns
    out = []
    for r in df.collect():
        headers = tuple((h.key, h.value) for h in r.headers) if with_headers else None
        out.append((r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, r.timestampType, headers))
    return sorted(out, key=lambda row: row[:3])


def _same_rows(spark: Any, metadata_url: str, bucket_url: str, **options: Any) -> list[tuple[Any, ...]]:
    jvm = _rows(spark, metadata_url, bucket_url, "jvm", **options)
    python = _rows(spark, metadata_url, bucket_url, "python", **options)
    assert jvm == python, options
    return jvm


# --- through Spark ------------------------------------------------------------------------------------


def test_jvm_and_python_decoders_give_the_same_rows(spark: Any, tmp_path: Path) -> None:
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    with run_server(local_settings(tmp_path)) as srv:
        for codec in codecs:
            configs = {} if codec == "none" else {"compression.type": codec}
            srv.create_topic(f"c-{codec}", partitions=3, **configs)
            for round_ in range(3):
                batch_ = [
                    {
                        "key": None if i % 7 == 0 else f"k{i % 5}",
                        "value": None if i % 6 == 0 else f"{codec} {round_}/{i} " * (1 + i % 4),
                        "headers": [{"name": "n", "value": str(i)}, {"name": "nul", "value": None}]
                        if i % 2
                        else [],
                        "timestamp": RECENT + 1000 * round_ - i,  # backwards within a batch
                        "partition": i % 3,
                    }
                    for i in range(12)
                ]
                assert srv.produce(f"c-{codec}", batch_).status_code == 200
        srv.create_topic("users", partitions=2, **{"cleanup.policy": "compact", "compression.type": "lz4"})
        for round_ in range(4):
            users = [
                {"key": f"u{k}", "value": None if (k + round_) % 5 == 0 else f"{round_}-{k}"}
                for k in range(15)
            ]
            assert srv.produce("users", users).status_code == 200
            if round_ == 2:
                rt = srv.runtime
                CompactionRound(rt.store, rt.metadata, rt.clock, random.Random(2), "t").run_once(
                    "users", force=True
                )
        metadata_url, bucket_url = srv.runtime.settings.metadata_url, srv.runtime.settings.bucket_url
        topics = ",".join([*(f"c-{c}" for c in codecs), "users"])

        everything = _same_rows(spark, metadata_url, bucket_url, subscribe=topics, includeHeaders="true")
        assert len([r for r in everything if r[0] != "users"]) == 5 * 36
        users = [r for r in everything if r[0] == "users"]
        hwm = sum(p["high_watermark"] for p in srv.client.get("/v1/topics/users").json()["partitions"])
        assert 0 < len(users) < hwm  # compaction left holes
        assert any(r[7] and r[7][1] == ("nul", None) for r in everything)  # a header with a null value
        assert any(r[3] is None for r in everything)
        assert any(r[4] is None for r in everything)

        # The JVM source builds only the columns a query uses; every record is decoded all the same.
        for columns in (["value", "offset"], ["headers", "partition"], []):
            jvm, python = (
                read_topic(
                    spark, metadata_url, bucket_url, decoder=d, subscribe=topics, includeHeaders="true"
                )
                .select(*columns)
                .collect()
                for d in ("jvm", "python")
            )
            assert sorted(repr(tuple(r)) for r in jvm) == sorted(repr(tuple(r)) for r in python)
            assert len(jvm) == len(everything)
        without = _same_rows(spark, metadata_url, bucket_url, subscribe=topics)
        assert [r[:7] for r in without] == [r[:7] for r in everything]
        ranged = _same_rows(
            spark,
            metadata_url,
            bucket_url,
            subscribe="c-gzip,users",
            startingOffsets='{"c-gzip":{"0":2,"2":-1},"users":{"1":4}}',
            endingOffsets='{"c-gzip":{"0":9},"users":{"0":20}}',
            includeHeaders="true",
        )
        assert {(r[0], r[1]) for r in ranged} <= {("c-gzip", 0), ("c-gzip", 1), ("users", 0), ("users", 1)}
        assert {r[2] for r in ranged if r[:2] == ("c-gzip", 0)} == set(range(2, 9))
        assert all(r[2] < 20 for r in ranged if r[:2] == ("users", 0))
        assert all(r[2] >= 4 for r in ranged if r[:2] == ("users", 1))
        assert _same_rows(spark, metadata_url, bucket_url, assign='{"c-snappy":[1],"users":[0]}')


def test_batches_other_clients_write_read_the_same(spark: Any, tmp_path: Path) -> None:
    """Raw snappy, zstd frames without a content size, LogAppendTime and transactional batches, mixed in
    every chunk of several files and partitions."""
    files = []
    for f in range(3):
        chunks = []
        for p in range(2):
            data = b""
            count = 0
            for i, kind in enumerate(KINDS):
                recs = [
                    records.Record(
                        count + j,
                        T0 + 10 * f + j - i,
                        None if j == 1 else f"key-{f}-{p}-{i}-{j}".encode(),
                        None if j == 2 else f"{kind} value {j}".encode() * (j + 1),
                        (records.Header("h", None), records.Header("ü", b"\x00\xff")) if j % 2 else (),
                    )
                    for j in range(3)
                ]
                flags = (LOG_APPEND_TIME if i % 2 else 0) | (TRANSACTIONAL if i % 3 == 0 else 0)
                data += batch(recs, count, kind, flags=flags)
                count += len(recs)
            chunks.append(Chunk("other", p, data, count, T0 - 10, T0 + 40))
        files.append(chunks)
    metadata_url, bucket_url = commit_files(tmp_path, {"other": 2}, files)
    rows = _same_rows(spark, metadata_url, bucket_url, subscribe="other", includeHeaders="true")
    assert len(rows) == 3 * 2 * len(KINDS) * 3
    assert {r[6] for r in rows} == {0, 1}  # CreateTime and LogAppendTime
    assert ("ü", b"\x00\xff") in {h for r in rows for h in r[7]}
    _same_rows(
        spark, metadata_url, bucket_url, subscribe="other", startingOffsets='{"other":{"0":25,"1":40}}'
    )


def _spark_error(spark: Any, metadata_url: str, bucket_url: str, decoder: str) -> str:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    with pytest.raises((PySparkException, Py4JJavaError)) as raised:
        read_topic(spark, metadata_url, bucket_url, decoder=decoder, subscribe="t").collect()
    return str(raised.value)


def test_a_corrupt_chunk_and_a_bomb_fail_both_decoders_alike(spark: Any, tmp_path: Path) -> None:
    good = batch([records.Record(0, T0, b"k", b"v")], 0)
    metadata_url, bucket_url = commit_files(tmp_path / "crc", {"t": 1}, [[Chunk("t", 0, good, 1)]])
    (path,) = (tmp_path / "crc" / "bucket").rglob("*.strata")
    key = path.relative_to(tmp_path / "crc" / "bucket").as_posix()
    damaged = bytearray(path.read_bytes())
    damaged[65] ^= 0x01  # inside the chunk (70 bytes): its CRC no longer matches
    path.write_bytes(bytes(damaged))
    jvm = _spark_error(spark, metadata_url, bucket_url, "jvm")
    assert f"CodecError 50002: chunk in {key} fails its CRC-32C check (stored 0x" in jvm
    assert "fails its CRC-32C check (stored 0x" in _spark_error(spark, metadata_url, bucket_url, "python")

    metadata_url, bucket_url = commit_files(
        tmp_path / "bomb", {"t": 1}, [[Chunk("t", 0, bomb("zstd", LIMIT + 1), 1)]]
    )
    jvm = _spark_error(spark, metadata_url, bucket_url, "jvm")
    assert f"CodecError 50002: zstd data decompresses to more than {LIMIT} bytes" in jvm
    assert "(object data/l0/" in jvm
    assert f"decompresses to more than {LIMIT} bytes" in _spark_error(
        spark, metadata_url, bucket_url, "python"
    )


def test_fail_on_data_loss_false_skips_a_damaged_chunk_and_reads_on(spark: Any, tmp_path: Path) -> None:
    """Spark's Kafka source option: with failOnDataLoss=false a damaged chunk is skipped (and logged with
    its range) and every other chunk is read, by both decoders alike; the default still fails."""
    good = [batch([records.Record(0, T0 + i, b"k", b"v%d" % i)], 0) for i in range(3)]
    files = [[Chunk("t", 0, good[i], 1)] for i in range(3)]  # one file per record: offsets 0, 1, 2
    metadata_url, bucket_url = commit_files(tmp_path, {"t": 1}, files)
    paths = sorted((tmp_path / "bucket").rglob("*.strata"), key=lambda p: p.stat().st_mtime_ns)
    middle = bytearray(paths[1].read_bytes())
    middle[65] ^= 0x01  # the second record's chunk no longer matches its CRC
    paths[1].write_bytes(bytes(middle))
    for decoder in ("jvm", "python"):
        df = read_topic(
            spark, metadata_url, bucket_url, decoder=decoder, subscribe="t", failOnDataLoss="false"
        )
        assert sorted((r["offset"], bytes(r["value"])) for r in df.collect()) == [(0, b"v0"), (2, b"v2")]
        assert "fails its CRC-32C check" in _spark_error(spark, metadata_url, bucket_url, decoder)


def test_an_unknown_decoder_is_a_read_option_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidReadOption, match="decoder must be one of jvm, python"):
        read_topic(None, "sqlite:///unused.db", f"file://{tmp_path}", decoder="scala", subscribe="t")  # type: ignore[arg-type]


# --- the task list and the jar ------------------------------------------------------------------------


def test_the_task_list_names_keys_urls_and_chunks(tmp_path: Path) -> None:
    bucket = tmp_path / "my checkout" / "50% [x]"
    tasks = {
        "data/l0/b.strata": (
            ChunkTask("t", 1, 10, 0, 100, 0xFFFFFFFF, 12, 20, (AbortedTxn(4, 10, 15), AbortedTxn(9, 14, 30))),
        ),
        "data/l0/a.strata": (
            ChunkTask("t", 0, 0, 0, 5, 1, 0, 3),
            ChunkTask("u.v-w_x", 7, 2**62, 5, 9, 0, 2**62, 2**62 + 4),
        ),
    }
    text = encode_tasks(tasks, lambda key: object_location(f"file://{bucket}", key))
    assert text.split("\n") == [
        HEADER,
        f"F\tdata/l0/a.strata\tfile://{bucket}/data/l0/a.strata",
        "C\tt\t0\t0\t0\t5\t1\t0\t3",
        f"C\tu.v-w_x\t7\t{2**62}\t5\t9\t0\t{2**62}\t{2**62 + 4}",
        f"F\tdata/l0/b.strata\tfile://{bucket}/data/l0/b.strata",
        "C\tt\t1\t10\t0\t100\t4294967295\t12\t20",
        "X\t4\t10\t15",
        "X\t9\t14\t30",
        "",
    ]
    assert HEADER == "strata-tasks 2"
    # Hadoop opens the path verbatim; only Spark's file loader (binaryFile) needs glob characters escaped.
    assert object_url(f"file://{bucket}", "k") == f"file://{bucket}/k".replace("[", "\\[").replace("]", "\\]")
    assert (
        object_location("s3://bkt/pre", "data/l0/k")
        == object_url("s3://bkt/pre", "data/l0/k")
        == "s3a://bkt/pre/data/l0/k"
    )
    with pytest.raises(SettingsError, match="tab or a line break"):
        encode_tasks(tasks, lambda key: f"file:///a\tb/{key}")


def test_the_decoder_jar_is_rebuilt_only_when_stale_and_needs_a_jdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = jars.decoder_jar()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))  # from here on, nothing can be compiled
    shutil.copy(built, tmp_path / jars.DECODER_JAR)
    assert jars.decoder_jar(tmp_path) == tmp_path / jars.DECODER_JAR  # current: taken as it is
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / jars.DECODER_JAR).write_bytes(b"not a jar")
    with pytest.raises(SparkSetupError, match=r"needs a JDK 17 or newer \(JAVA_HOME .* has no bin/javac\)"):
        jars.decoder_jar(stale)
    with pytest.raises(SparkSetupError, match="needs a JDK"):
        jars.decoder_jar(tmp_path / "empty")


# --- without Spark: DecodeTool against decode_file ------------------------------------------------------

_CODEC_MESSAGE = re.compile(r"^(gzip|snappy|lz4|zstd) data ")
_WHERE = re.compile(r" \((object|chunk) [^()]*\)$")  # what the JVM adds: where the error is


def _normal(message: str) -> str:
    """What both decoders must agree on: the message, or for a codec's stream only which codec refused it
    (the details come from different libraries)."""
    match = _CODEC_MESSAGE.match(message)
    return f"{match.group(1)} data" if match else message


def _python_outcome(content: bytes, tasks: Sequence[ChunkTask], headers: bool, key: str) -> list[str] | str:
    try:
        out = decode_file(content, tasks, headers, object_key=key)
    except CodecError as exc:
        return "error: " + _normal(exc.message)
    except (OverflowError, pa.ArrowInvalid):
        return "error: timestamp"
    micros = out.column("timestamp").cast(pa.int64()).to_pylist()
    rows = []
    # Not to_pylist() on timestamps: far from today they are no datetime.
    for i, row in enumerate(out.drop_columns(["timestamp"]).to_pylist()):
        fields = [row["topic"], row["partition"], row["offset"], micros[i], row["timestampType"]]
        fields += ["~" if row[c] is None else row[c].hex() for c in ("key", "value")]
        if headers:
            fields.append(
                ",".join(
                    f"{h['key'].encode().hex()}:{'~' if h['value'] is None else h['value'].hex()}"
                    for h in row["headers"]
                )
            )
        rows.append("\t".join(["row", *map(str, fields)]))
    return rows


def _jvm_outcomes(
    cases: dict[str, tuple[bytes, list[ChunkTask]]], headers: bool, merge_gap: int
) -> dict[str, list[str] | str]:
    """Each case's outcome from DecodeTool: its row lines, or "error: <normalised message>"."""
    with tempfile.TemporaryDirectory() as tmp:
        bucket = Path(tmp)
        for key, (content, _) in cases.items():
            (bucket / key).parent.mkdir(parents=True, exist_ok=True)
            (bucket / key).write_bytes(content)
        task_file = bucket / "tasks.txt"
        task_file.write_text(
            encode_tasks({k: t for k, (_, t) in cases.items()}, lambda k: f"file://{bucket}/{k}")
        )
        classpath = f"{jars.decoder_jar()}{os.pathsep}{jars.pyspark_jars_dir() / '*'}"
        command = [
            require_java(),
            "-cp",
            classpath,
            "strata.spark.DecodeTool",
            str(task_file),
            str(headers).lower(),
        ]
        done = subprocess.run(
            [*command, str(merge_gap)], capture_output=True, text=True, timeout=300, check=False
        )
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes: dict[str, list[str] | str] = {}
    key = ""
    rows: list[str] = []
    for line in done.stdout.splitlines():
        kind, _, rest = line.partition("\t")
        if kind == "file":
            key, rows = rest, []
        elif kind == "row":
            rows.append(line)
        elif kind == "ok":
            outcomes[key] = rows
        elif kind == "error":
            prefix = "CodecError 50002: "
            assert rest.startswith(prefix), rest
            message = _WHERE.sub("", rest.removeprefix(prefix))
            timestamp = "outside what a timestamp column holds" in message
            outcomes[key] = "error: " + ("timestamp" if timestamp else _normal(message))
        else:
            pytest.fail(f"DecodeTool: {line}")
    assert set(outcomes) == set(cases)
    return outcomes


def _assert_same(cases: dict[str, tuple[bytes, list[ChunkTask]]]) -> None:
    for headers, gap in (
        (True, 1 << 20),
        (False, 0),
    ):  # gap 0: every chunk with a gap before it is one more read
        jvm = _jvm_outcomes(cases, headers, gap)
        for key, (content, tasks) in cases.items():
            assert jvm[key] == _python_outcome(content, tasks, headers, key), (key, tasks)


_maybe_bytes = st.none() | st.binary(max_size=12)
_headers = st.lists(st.tuples(st.text(max_size=4), _maybe_bytes), max_size=3)


@st.composite
def _chunk(draw: st.DrawFn) -> bytes:
    """A chunk of 1-3 batches of every kind, flags and wide timestamps, possibly damaged behind a good CRC."""
    data = bytearray()
    spans = []
    relative = 0
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 5))
        offsets = sorted(draw(st.sets(st.integers(0, 9), min_size=n, max_size=n)))
        # 2**61 ms overflows microseconds: kept rows then fail both decoders, once the file is decoded.
        base_ts = draw(st.sampled_from([T0] * 12 + [0, -(2**40), 2**61]))
        recs = [
            records.Record(
                relative + o,
                base_ts + draw(st.integers(-(2**20), 2**20)),
                draw(_maybe_bytes),
                draw(_maybe_bytes),
                tuple(records.Header(k, v) for k, v in draw(_headers)),
            )
            for o in offsets
        ]
        flags = draw(st.sampled_from([0, 0, LOG_APPEND_TIME, TRANSACTIONAL, TRANSACTIONAL]))
        # Producers 1 and 2, the ids of the aborted ranges _file draws; a non-transactional batch of one
        # is never dropped.
        encoded = batch(
            recs,
            relative,
            draw(st.sampled_from(KINDS)),
            flags=flags,
            producer_id=draw(st.sampled_from([1, 2])),
        )
        spans.append((len(data), len(data) + len(encoded)))
        data += encoded
        relative = recs[-1].offset + 1
    damage = draw(st.sampled_from(["none"] * 12 + ["flip", "header", "truncate", "trail"]))
    if damage in ("flip", "header"):
        start, _end = draw(st.sampled_from(spans))
        at = draw(st.integers(start + 8, start + 60) if damage == "header" else st.integers(0, len(data) - 1))
        data[at] ^= draw(st.integers(1, 255))
        if draw(st.integers(0, 4)):  # mostly behind a good batch CRC, so the records are checked too
            for s, e in spans:
                if s <= at < e:
                    fix_crc(data, s, e)
    elif damage == "truncate":
        del data[draw(st.integers(1, len(data) - 1)) :]
    elif damage == "trail":
        data += draw(st.binary(min_size=1, max_size=70))
    return bytes(data)


@st.composite
def _file(draw: st.DrawFn) -> tuple[bytes, list[ChunkTask]]:
    """A file of 1-4 chunks (two topics, several partitions, gaps and unread bytes between them, base offsets
    up to 2^63 - 20, ranges that cut the chunks, aborted transactions of producers 1 and 2 over some of
    their batches), some with a wrong CRC."""
    content = bytearray(draw(st.binary(max_size=3)))
    tasks = []
    for c in range(draw(st.integers(1, 4))):
        data = draw(_chunk())
        if draw(st.integers(0, 2)) == 0:
            content += draw(st.binary(min_size=1, max_size=40))  # bytes no chunk of the read covers
        base = draw(st.sampled_from([0, 1000, 2**40, 2**63 - 20]))
        start = base + draw(st.integers(0, 5))
        end = min(2**63 - 1, start + draw(st.integers(0, 40)))
        crc = crc32c(data) ^ (1 if draw(st.integers(0, 39)) == 0 else 0)
        aborted = tuple(
            AbortedTxn(producer, min(2**63 - 1, base + first), min(2**63 - 1, base + first + span))
            for producer, first, span in draw(
                st.lists(
                    st.tuples(st.sampled_from([1, 2]), st.integers(0, 20), st.integers(0, 15)), max_size=2
                )
            )
        )
        tasks.append(ChunkTask(f"t{c % 2}", c, base, len(content), len(data), crc, start, end, aborted))
        content += data
    content += b"footer and trailer"
    return bytes(content), tasks


# No shrinking: every attempt runs the JVM twice. A failure names the file and its chunks; the draws are
# printed.
@settings(
    max_examples=4,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_random_and_broken_files_give_the_python_rows_or_error(data: st.DataObject) -> None:
    _assert_same({f"data/l0/{i:04d}.strata": data.draw(_file()) for i in range(40)})


def test_valid_files_of_every_kind_decode_and_bombs_are_refused() -> None:
    rng = random.Random(5)
    cases: dict[str, tuple[bytes, list[ChunkTask]]] = {}
    for i, kind in enumerate(KINDS):
        recs = [
            records.Record(j, T0 + rng.randrange(-1000, 1000), rng.randbytes(8), rng.randbytes(300), ())
            for j in range(50)
        ]
        data = batch(recs, 0, kind)
        cases[f"data/l0/valid-{kind}.strata"] = (
            data,
            [ChunkTask("t", i, 10 * i, 0, len(data), crc32c(data), 0, 1 << 40)],
        )
    for kind in ("gzip", "snappy", "lz4", "zstd"):
        for size, name in ((LIMIT, "at-limit"), (LIMIT + 1, "bomb")):
            data = bomb(kind, size)
            cases[f"data/l0/{name}-{kind}.strata"] = (
                data,
                [ChunkTask("t", 0, 0, 0, len(data), crc32c(data), 0, 1)],
            )
    jvm = _jvm_outcomes(cases, True, 1 << 20)
    for key, (content, tasks) in cases.items():
        expected = _python_outcome(content, tasks, True, key)
        assert jvm[key] == expected, key
        if "/valid-" in key:
            assert len(expected) == 50
        elif "/at-limit-" in key:
            # Exactly the limit decompresses (to zero bytes, which are no valid record).
            assert isinstance(expected, str)
            assert "decompresses" not in expected
        else:
            assert expected == f"error: {key.rsplit('-', 1)[1].removesuffix('.strata')} data"


def test_decode_tool_reports_the_bomb_with_its_limit() -> None:
    data = bomb("gzip", LIMIT + 1)
    key = "data/l0/bomb.strata"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "bomb").write_bytes(data)
        tasks = encode_tasks(
            {key: [ChunkTask("t", 0, 0, 0, len(data), crc32c(data), 0, 1)]}, lambda k: f"file://{tmp}/bomb"
        )
        (Path(tmp) / "tasks").write_text(tasks)
        classpath = f"{jars.decoder_jar()}{os.pathsep}{jars.pyspark_jars_dir() / '*'}"
        command = [require_java(), "-cp", classpath, "strata.spark.DecodeTool", f"{tmp}/tasks", "false"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.stdout.splitlines()[1] == (
        f"error\tCodecError 50002: gzip data decompresses to more than {LIMIT} bytes (a decompression bomb?) "
        f"(object {key}, chunk t/0 at byte 0, batch at byte 0 of the chunk)"
    )


def test_aborted_transactions_batches_are_dropped_alike() -> None:
    """read_committed's filter in both decoders: a transactional batch whose producer id and absolute base
    offset fall in one of its chunk's aborted ranges is dropped, any other batch kept; a dropped batch is
    still checked (a wrong batch CRC fails the file)."""

    def chunk(kind: str) -> bytes:
        def recs(first: int, n: int) -> list[records.Record]:
            return [records.Record(first + i, T0 + i, b"k", b"%s %d" % (kind.encode(), i)) for i in range(n)]

        # Relative offsets: 0-2 producer 7 transactional, 3 producer 7 plain, 4-5 producer 8 transactional,
        # 6-7 producer 7 transactional again.
        return (
            batch(recs(0, 3), 0, kind, flags=TRANSACTIONAL, producer_id=7)
            + batch(recs(3, 1), 3, kind, producer_id=7)
            + batch(recs(4, 2), 4, kind, flags=TRANSACTIONAL | LOG_APPEND_TIME, producer_id=8)
            + batch(recs(6, 2), 6, kind, flags=TRANSACTIONAL, producer_id=7)
        )

    base = 2**40
    ranges = [
        (AbortedTxn(7, base, base + 3),),
        (AbortedTxn(8, base + 4, base + 9), AbortedTxn(7, base + 6, base + 9)),
        (AbortedTxn(7, base + 1, base + 3), AbortedTxn(9, base, base + 9), AbortedTxn(7, 0, 3)),
    ]
    kept = [[3, 4, 5, 6, 7], [0, 1, 2, 3], list(range(8))]
    cases: dict[str, tuple[bytes, list[ChunkTask]]] = {}
    for kind in KINDS:
        data = chunk(kind)
        for i, aborted in enumerate(ranges):
            task = ChunkTask("t", 0, base, 0, len(data), crc32c(data), base, base + 8, aborted)
            cases[f"data/l0/{kind}-{i}.strata"] = (data, [task])
    damaged = bytearray(chunk("none"))
    damaged[70] ^= 0x01  # in the records of the first batch, an aborted one: its batch CRC fails
    task = ChunkTask("t", 0, 0, 0, len(damaged), crc32c(bytes(damaged)), 0, 8, (AbortedTxn(7, 0, 3),))
    cases["data/l0/damaged.strata"] = (bytes(damaged), [task])
    for headers in (True, False):
        jvm = _jvm_outcomes(cases, headers, 1 << 20)
        for key, (content, tasks) in cases.items():
            expected = _python_outcome(content, tasks, headers, key)
            assert jvm[key] == expected, key
            if key.endswith("damaged.strata"):
                assert expected == "error: record batch at position 0 fails its CRC-32C check"
            else:
                i = int(key.removesuffix(".strata").rsplit("-", 1)[1])
                assert [int(row.split("\t")[3]) - base for row in expected] == kept[i], key


def test_the_jvm_task_list_refuses_an_aborted_range_out_of_place(tmp_path: Path) -> None:
    text = encode_tasks({"k": [ChunkTask("t", 0, 0, 0, 5, 1, 0, 3)]}, lambda key: f"file://{tmp_path}/{key}")
    lines = text.split("\n")
    bad = {
        "before-any-chunk": [*lines[:2], "X\t7\t0\t3", *lines[2:]],
        "backwards": [*lines[:3], "X\t7\t3\t0", *lines[3:]],
        "negative": [*lines[:3], "X\t-1\t0\t3", *lines[3:]],
        "version-1": ["strata-tasks 1", *lines[1:]],
    }
    classpath = f"{jars.decoder_jar()}{os.pathsep}{jars.pyspark_jars_dir() / '*'}"
    for name, wrong in bad.items():
        (tmp_path / name).write_text("\n".join(wrong))
        command = [require_java(), "-cp", classpath, "strata.spark.DecodeTool", str(tmp_path / name), "false"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode != 0, name
        why = {
            "before-any-chunk": "task list line 3: an aborted range before any chunk",
            "backwards": "task list line 4: an aborted range must not end before it starts",
            "negative": "task list line 4: '-1' is not a number >= 0",
            "version-1": "task list does not start with 'strata-tasks 2'",
        }[name]
        assert why in done.stderr, (name, done.stderr[-2000:])
