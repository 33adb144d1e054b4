"""The lake benchmark's upsert phase: what a state table's commit rewrites, against its bucket count.

One ``strata serve --role agent`` on the embedded default. For each of ``--upsert-buckets`` a compacted
topic (``cleanup.policy=compact``, ``strata.iceberg.mode=raw``: its state table is on by default) of
``--upsert-partitions`` partitions with ``strata.iceberg.upsert.buckets`` set to it, filled with
``--upsert-keys`` keys (``--upsert-value-bytes`` values) and committed once (not measured). Then, for each of
``--upsert-fractions``, ``--upsert-commits`` commits that each follow an update of that fraction of the
keys, drawn at random (a fixed seed, so every bucket count sees the same keys), each one forced lake round
in this process (``bench.lake_common.LocalLake``). Per commit, from the run's ``UpsertResult`` and the state
table's new snapshot: the buckets rewritten, the Parquet bytes written (``added-files-size``) and the state
table's size after it (``total-files-size``), the Arrow bytes of the rows rewritten, the files created (of
both tables: the topic's and the state table), and the round's wall time. A commit of ``k`` random keys is
expected to touch ``1 - (1 - 1/B)^k`` of ``B`` buckets, and to rewrite about that share of the table.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

from bench.harness import AgentSpec, log, start_agent, stop_proc
from bench.lake_analysis import describe_files, expected_bucket_share, mean, total_files
from bench.lake_common import LocalLake, create_topic, lake_configs, produce
from pipeline.lake.state_writer import state_table_name
from storage.lake_config import UPSERT_BUCKETS, default_table


def _key(i: int) -> bytes:
    return b"key-%08d" % i


def upsert_phase(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    agent = start_agent(
        AgentSpec(["--role", "agent", "--log-level", "warning"], kafka_ports=1), workdir, "upsert"
    )
    lake = None
    out: dict[str, Any] = {}
    try:
        assert agent.bootstrap is not None
        lake = LocalLake(agent.data_dir)
        for buckets in args.upsert_buckets:
            out[str(buckets)] = _buckets(args, lake, agent.url, agent.bootstrap, buckets)
    finally:
        if lake is not None:
            lake.close()
        stop_proc(agent.proc, "upsert")
    return out


def _buckets(
    args: argparse.Namespace, lake: LocalLake, url: str, bootstrap: str, buckets: int
) -> dict[str, Any]:
    topic = f"state-b{buckets}"
    configs = lake_configs(args.interval_ms, **{"cleanup.policy": "compact", UPSERT_BUCKETS: str(buckets)})
    create_topic(url, topic, args.upsert_partitions, configs)
    value_rng = random.Random(buckets)
    log(f"[upsert] {buckets} buckets, {args.upsert_keys} keys; commits of {args.upsert_fractions} of them")
    size = args.upsert_value_bytes
    # Random values: they compress as little in Parquet as they would in practice (a repeated value would
    # shrink to nothing and leave only the keys' bytes to rewrite).
    produce(bootstrap, topic, ((_key(i), value_rng.randbytes(size)) for i in range(args.upsert_keys)))
    lake.commit(topic)
    state = state_table_name(default_table(topic))
    state_dir = state.replace(".", "/", 1)  # where the warehouse keeps it: <namespace>/<table>
    rng = random.Random(7)  # every bucket count sees the same keys changed, commit by commit
    out: dict[str, Any] = {"keys": args.upsert_keys, "fractions": {}}
    for fraction in args.upsert_fractions:
        changed = max(1, round(fraction * args.upsert_keys))
        commits = []
        for _ in range(args.upsert_commits):
            keys = rng.sample(range(args.upsert_keys), changed)
            produce(bootstrap, topic, ((_key(k), value_rng.randbytes(size)) for k in keys))
            done = lake.commit(topic)
            state_run, snapshot = done.run.state, lake.table(state).current_snapshot()
            if state_run is None or state_run.upsert is None or snapshot is None or snapshot.summary is None:
                raise RuntimeError(f"the state table of {topic} did not commit: {state_run}")
            upsert, summary = state_run.upsert, snapshot.summary
            commits.append(
                {
                    "keys_changed": upsert.keys_changed,
                    "buckets_rewritten": upsert.buckets_rewritten,
                    "arrow_bytes_rewritten": upsert.bytes_written,
                    "parquet_bytes_written": int(summary.get("added-files-size") or 0),
                    "state_bytes": int(summary.get("total-files-size") or 0),
                    "files": done.files,
                    "state_files": {state_dir: done.files.get(state_dir, {})},
                    "wall_s": round(done.wall_s, 3),
                }
            )
        out["fractions"][str(fraction)] = _summary(commits, buckets, changed)
    return out


def _summary(commits: list[dict[str, Any]], buckets: int, changed: int) -> dict[str, Any]:
    written = mean(c["parquet_bytes_written"] for c in commits) or 0.0
    size = mean(c["state_bytes"] for c in commits) or 0.0
    return {
        "keys_per_commit": changed,
        "buckets_rewritten_mean": mean(c["buckets_rewritten"] for c in commits),
        "expected_bucket_share_pct": round(100 * expected_bucket_share(buckets, changed), 1),
        "parquet_bytes_written_mean": round(written),
        "state_bytes_mean": round(size),
        "rewritten_pct": round(100 * written / size, 1) if size else None,
        "arrow_bytes_rewritten_mean": round(mean(c["arrow_bytes_rewritten"] for c in commits) or 0),
        "files_per_commit_mean": mean(total_files(c["files"]) for c in commits),
        "state_files_per_commit_mean": mean(total_files(c["state_files"]) for c in commits),
        "state_files_last_commit": describe_files(commits[-1]["state_files"]) if commits else None,
        "wall_s_mean": round(mean(c["wall_s"] for c in commits) or 0.0, 3),
        "commits": commits,
    }
