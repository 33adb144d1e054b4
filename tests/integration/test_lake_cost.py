"""What the lake costs, counted where it writes and reads (pipeline/lake/counting_io.py, meter.py) and shown
where a user looks: the topic's lake status, the metrics history behind the console's cost cards, and
Prometheus.

- The request model: each filesystem operation pyiceberg makes through the counting FileIO is counted as
  the requests S3 then answers, checked against a moto server that records what it is sent (Arrow's S3
  client is the only one with its User-Agent).
- A deployment of two processes, as in production: an agent serving the API and the console (no lake
  round), and a worker (``strata lake run``, a child process) committing the table. After the commit, the
  agent's status, history and cost show the worker's requests and the table's bytes, equal to what a
  listing of the warehouse finds (every file the commit wrote is in it, each one upload of three requests)
  and, on S3, to the requests the server answered. A second commit made by the agent's own process shows in
  its Prometheus metrics too.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pipeline.lake.counting_io import PART_BYTES, CountingFileIO
from pipeline.lake.meter import LakeMeter
from storage.lake_catalog import catalog_properties
from storage.lake_config import default_table
from storage.objectstore.base import DELETE, GET, HEAD, LIST, PUT
from strata.settings import Settings
from tests.fixtures.metadata import isolated_postgres_schema
from tests.fixtures.s3 import RecordingS3
from tests.fixtures.server import RunningServer, local_settings, run_server, s3_postgres_settings

pytestmark = pytest.mark.integration

ARROW = "aws-sdk-cpp"  # the User-Agent of Arrow's S3 client, pyiceberg's FileIO
SAMPLE_MS = 200


def by_kind(seen: list[Any]) -> dict[str, int]:
    counts = Counter(r.kind for r in seen if r.agent.startswith(ARROW))
    return {kind: counts.get(kind, 0) for kind in (PUT, GET, HEAD, LIST, DELETE)}


def test_the_request_model_is_what_s3_answers(recording_s3: RecordingS3, moto_admin_client: Any) -> None:
    bucket = f"strata-model-{uuid.uuid4().hex[:12]}"
    moto_admin_client.create_bucket(Bucket=bucket)
    meter = LakeMeter()
    props = catalog_properties("sqlite://", f"s3://{bucket}", s3_endpoint=recording_s3.endpoint)
    io = CountingFileIO({**props, "s3.region": "us-east-1", **meter.properties()})
    fs = io.fs_by_scheme("s3", bucket)
    assert isinstance(fs, pafs.PyFileSystem)
    sizes = {"empty": 0, "small": 100, "parts": 2 * PART_BYTES + 5}
    with meter.scope() as scope:
        for name, size in sizes.items():
            with fs.open_output_stream(f"{bucket}/lake/t/{name}") as out:
                for start in range(0, size, 1 << 20):
                    out.write(b"x" * min(1 << 20, size - start))
        infos = fs.get_file_info([f"{bucket}/lake/t/small", f"{bucket}/lake/t/missing", f"{bucket}/lake/t"])
        assert [i.type for i in infos] == [
            pafs.FileType.File,
            pafs.FileType.NotFound,
            pafs.FileType.Directory,
        ]
        with fs.open_input_file(f"{bucket}/lake/t/parts") as f:
            assert len(f.read_at(10, 5)) == 10
            assert f.read_at(10, sizes["parts"]) == b""  # past the end: no request
            f.seek(sizes["parts"] - 3)
            assert f.read() == b"xxx"
            assert f.read() == b""
        with fs.open_input_stream(f"{bucket}/lake/t/small") as f:
            assert f.read() == b"x" * 100
        assert len(fs.get_file_info(pafs.FileSelector(f"{bucket}/lake", recursive=True))) == 4
        fs.delete_file(f"{bucket}/lake/t/empty")
    usage = scope.usage()
    assert dict(usage.requests) == by_kind(recording_s3.seen(bucket))
    assert usage.requests[PUT] == 3 + 3 + 5 + 1  # three uploads (one of three parts), a directory marker
    assert (usage.objects_written, usage.bytes_written, usage.deletes) == (3, sum(sizes.values()), 1)
    assert usage.bytes_read == 10 + 3 + 100


@dataclass
class Deployment:
    agent: RunningServer
    settings: Settings
    worker_flags: list[str]
    listing: Any  # () -> {key: size} of the objects under lake/
    recording: RecordingS3 | None
    bucket: str | None


@pytest.fixture(params=["local-sqlite", "s3-postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    with ExitStack() as stack:
        if request.param == "local-sqlite":
            settings = local_settings(tmp_path, metrics_sample_ms=SAMPLE_MS)
            root = Path(settings.data_dir) / "bucket"
            flags = ["--data-dir", settings.data_dir]
            recording, bucket = None, None

            def listing() -> dict[str, int]:
                files = (p for p in (root / "lake").rglob("*") if p.is_file())
                return {str(p.relative_to(root)): p.stat().st_size for p in files}

        else:
            recording = request.getfixturevalue("recording_s3")
            client = request.getfixturevalue("moto_admin_client")
            bucket = f"strata-cost-{uuid.uuid4().hex[:12]}"
            client.create_bucket(Bucket=bucket)
            url = stack.enter_context(isolated_postgres_schema(request.getfixturevalue("postgres_url")))
            settings = s3_postgres_settings(
                tmp_path, recording.endpoint, bucket, url, metrics_sample_ms=SAMPLE_MS
            )
            flags = ["--bucket", settings.bucket_url, "--s3-endpoint", recording.endpoint, "--metadata", url]

            def listing() -> dict[str, int]:
                pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="lake/")
                return {o["Key"]: o["Size"] for page in pages for o in page.get("Contents", [])}

        agent = stack.enter_context(run_server(settings))
        yield Deployment(agent, settings, flags, listing, recording, bucket)


def run_worker(d: Deployment, topic: str) -> None:
    """``strata lake run`` in its own process: the worker of a two-process deployment."""
    done = subprocess.run(
        [sys.executable, "-m", "strata.cli", "lake", "run", "--topic", topic, "--force", *d.worker_flags],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{topic}: committed" in done.stdout, done.stdout


def history_until(agent: RunningServer, done: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        history = agent.client.get("/v1/metrics/history").json()
        if done(history["points"]) or time.monotonic() > deadline:
            return dict(history)
        time.sleep(SAMPLE_MS / 1000)


def lake_metrics(agent: RunningServer, topic: str) -> dict[tuple[str, str], float]:
    text = agent.client.get("/metrics").text
    seen = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "strata_lake_requests_total" and sample.labels["topic"] == topic:
                assert sample.labels["store"] == "lake"
                seen[(sample.name, sample.labels["kind"])] = sample.value
            elif sample.name in ("strata_lake_table_bytes", "strata_lake_table_objects"):
                seen[(sample.name, sample.labels["table"])] = sample.value
    return seen


def check_history(
    agent: RunningServer, baseline_ms: int, requests: dict[str, int], files: dict[str, int]
) -> None:
    """The history (the console's cost cards and charts): the lake's rates since ``baseline_ms`` add up to
    its requests and are priced at the prices; its stored bytes are the warehouse's."""
    stored = sum(files.values())
    history = history_until(agent, lambda points: (points[-1]["lake"] or {}).get("stored_bytes") == stored)
    prices = history["prices"]
    points = [p for p in history["points"] if p["ts_ms"] >= baseline_ms]
    assert all(p["lake"] is not None for p in points)
    assert points[0]["ts_ms"] == baseline_ms
    seconds = [(b["ts_ms"] - a["ts_ms"]) / 1000 for a, b in itertools.pairwise(points)]
    rates = [p["lake"] for p in points[1:]]
    assert sum(r["puts_per_s"] * s for r, s in zip(rates, seconds, strict=True)) == pytest.approx(
        requests["put"] + requests["list"], abs=0.05
    )
    assert sum(r["gets_per_s"] * s for r, s in zip(rates, seconds, strict=True)) == pytest.approx(
        requests["get"] + requests["head"], abs=0.05
    )
    busy = max(rates, key=lambda r: r["puts_per_s"])
    per_second = busy["puts_per_s"] * prices["put_per_1000"] + busy["gets_per_s"] * prices["get_per_1000"]
    assert busy["monthly_cost_usd"] == pytest.approx(per_second / 1000 * 30 * 24 * 3600, rel=1e-3)
    latest = points[-1]["lake"]
    assert (latest["stored_bytes"], latest["stored_objects"]) == (stored, len(files))
    gib_month = prices["storage_per_gb_month"] * stored / (1 << 30)
    assert latest["storage_monthly_usd"] == pytest.approx(gib_month, abs=1e-4)


def test_the_lake_cost_shows_where_users_look(deployment: Deployment) -> None:
    d, topic = deployment, "costed"
    d.agent.create_topic(topic, 3, **{"strata.iceberg.mode": "raw"})
    records = [{"key": f"k{i}", "value": "v" * 50, "partition": i % 3} for i in range(60)]
    assert d.agent.produce(topic, records).status_code == 200
    # The agent's history has read the lake's totals before the worker starts: its baseline.
    before = history_until(d.agent, lambda points: bool(points) and points[-1]["lake"] is not None)
    baseline_ms = before["points"][-1]["ts_ms"]

    run_worker(d, topic)
    files = d.listing()
    status = d.agent.client.get(f"/v1/topics/{topic}/lake").json()
    assert status["stored"]["files"] == len(files) > 0
    assert status["stored"]["bytes"] == sum(files.values())
    # Every file under the table is one upload of the commit (three requests: it is under 10 MiB).
    requests = status["requests"]
    assert requests["put"] == 3 * len(files)
    assert requests["get"] > 0
    assert requests["head"] > 0
    if d.recording is not None and d.bucket is not None:
        seen = by_kind(d.recording.seen(d.bucket))
        assert seen == {k.upper(): requests[k] for k in ("put", "get", "head", "list", "delete")}

    check_history(d.agent, baseline_ms, requests, files)

    # A commit by the agent's own process (role all runs its lake round): its Prometheus metrics count it.
    assert d.agent.produce(topic, records).status_code == 200
    (run,) = d.agent.runtime.lake_round().run_once(topic, force=True).runs
    assert run.outcome == "committed"
    files = d.listing()
    after = d.agent.client.get(f"/v1/topics/{topic}/lake").json()
    assert after["requests"]["put"] == 3 * len(files)
    assert (after["stored"]["files"], after["stored"]["bytes"]) == (len(files), sum(files.values()))
    seen_metrics = lake_metrics(d.agent, topic)
    for kind in ("put", "get", "head", "list"):
        counted = after["requests"][kind] - requests[kind]
        assert seen_metrics.get(("strata_lake_requests_total", kind.upper()), 0) == counted
    table = default_table(topic)
    assert seen_metrics[("strata_lake_table_bytes", table)] == sum(files.values())
    assert seen_metrics[("strata_lake_table_objects", table)] == len(files)
    if d.recording is not None and d.bucket is not None:
        seen = by_kind(d.recording.seen(d.bucket))
        assert seen == {k.upper(): after["requests"][k] for k in ("put", "get", "head", "list", "delete")}

    # A third commit, with no listing (maintenance is not due for an hour): the stored figures move by what
    # the commit wrote, and still are the warehouse's.
    assert d.agent.produce(topic, records).status_code == 200
    round_ = d.agent.runtime.lake_round().run_once(topic, force=True)
    assert ([r.outcome for r in round_.runs], round_.maintained) == (["committed"], [])
    files = d.listing()
    third = d.agent.client.get(f"/v1/topics/{topic}/lake").json()
    assert third["stored"]["measured_ms"] == after["stored"]["measured_ms"]
    assert (third["stored"]["files"], third["stored"]["bytes"]) == (len(files), sum(files.values()))
    assert third["requests"]["put"] == 3 * len(files)


def test_a_topics_state_table_is_measured_with_its_table(tmp_path: Path) -> None:
    """A compacted topic's lake is two tables, the topic's and ``_state`` (copy-on-write of the key
    buckets: it reads and rewrites files): what the status says they hold is what both locations hold, at
    the first commit (a listing) and the next (the listing moved by what was written)."""
    settings = local_settings(tmp_path)
    lake = Path(settings.data_dir) / "bucket" / "lake"
    with run_server(settings) as agent:
        topic = "accounts"
        agent.create_topic(topic, 2, **{"strata.iceberg.mode": "raw", "strata.iceberg.upsert": "true"})
        for n in range(2):
            changes = [{"key": f"k{i % 7}", "value": f"v{n}-{i}"} for i in range(30)]
            assert agent.produce(topic, changes).status_code == 200
            (run,) = agent.runtime.lake_round().run_once(topic, force=True).runs
            assert (run.outcome, run.state.outcome if run.state else None) == ("committed", "committed")
            files = [p for p in lake.rglob("*") if p.is_file()]
            assert {p.relative_to(lake).parts[1] for p in files} == {topic, f"{topic}_state"}
            status = agent.client.get(f"/v1/topics/{topic}/lake").json()
            assert (status["stored"]["files"], status["stored"]["bytes"]) == (
                len(files),
                sum(p.stat().st_size for p in files),
            )
            assert status["requests"]["put"] == 3 * len(files)
            assert status["requests"]["get"] > 0
