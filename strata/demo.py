"""``strata demo``: keyed updates in, compaction, and the latest value per key read back with Spark.

Runs in one process on the embedded default (a local directory as bucket, SQLite), in a temporary
directory unless --data-dir is given. Needs Java and the hadoop-aws jars only for the Spark part
(``make jars``); the produce and compaction parts need nothing else.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agents.encode import ProduceRecord
from strata.runtime import build_runtime
from strata.settings import Settings

TOPIC = "demo-users"
CITIES = ("Lisbon", "Oslo", "Kyoto", "Lima", "Accra", "Perth", "Quito", "Riga")


async def _produce(settings: Settings, console: Console, keys: int, updates: int) -> dict[str, str]:
    runtime = build_runtime(settings)
    await runtime.start()
    reference: dict[str, str] = {}
    rng = random.Random(42)
    try:
        runtime.metadata.create_topic(TOPIC, 2, {"cleanup.policy": "compact"}, runtime.clock.now_ms())
        for round_ in range(updates):
            batch = []
            for k in range(keys):
                user = f"user-{k:02d}"
                # The last round deletes a few users: a tombstone (null value) per deleted key.
                value = (
                    None if round_ == updates - 1 and k % 7 == 3 else f"{rng.choice(CITIES)} (v{round_ + 1})"
                )
                batch.append(ProduceRecord(user.encode(), None if value is None else value.encode()))
                if value is None:
                    reference.pop(user, None)
                else:
                    reference[user] = value
            await runtime.agent.produce_records(TOPIC, batch)
        console.print(f"produced {keys * updates} updates of {keys} users to [bold]{TOPIC}[/bold]")
    finally:
        await runtime.close()
    return reference


def run_demo(data_dir: Path | None, keys: int = 20, updates: int = 5) -> int:
    console = Console()
    with tempfile.TemporaryDirectory(prefix="strata-demo-") as tmp:
        root = data_dir or Path(tmp)
        settings = Settings(data_dir=str(root), flush_interval_ms=50)
        reference = asyncio.run(_produce(settings, console, keys, updates))

        runtime = build_runtime(settings)
        try:
            before = sum(
                s.high_watermark - s.log_start_offset for s in runtime.metadata.partition_states(TOPIC)
            )
            result = runtime.compaction_round().run_once(TOPIC, force=True)
            live = sum(
                fc.chunk.record_count for p in range(2) for fc in runtime.metadata.partition_chunks(TOPIC, p)
            )
            console.print(
                f"compacted: {len(result.jobs)} job(s), {before} records -> {live} "
                "(the latest value of every user, and the tombstones of deleted users)"
            )
        finally:
            runtime.store.close()
            runtime.metadata.close()

        from pyspark.sql import SparkSession

        from pipeline.reader import latest_per_key, read_topic
        from pipeline.session import spark_session

        console.print("reading the topic with Spark (local[2]) ...")
        ours = SparkSession.getActiveSession() is None
        spark = spark_session(app_name="strata-demo")
        spark.sparkContext.setLogLevel("ERROR")
        rows = (
            latest_per_key(read_topic(spark, settings.metadata_url, settings.bucket_url, subscribe=TOPIC))
            .orderBy("key")
            .collect()
        )
        table = Table("key", "value", "partition", "offset", title=f"latest value per key in {TOPIC}")
        for row in rows:
            table.add_row(row.key.decode(), row.value.decode(), str(row.partition), str(row.offset))
        console.print(table)
        got = {row.key.decode(): row.value.decode() for row in rows}
        console.print(
            "[green]matches what was produced[/green]"
            if got == reference
            else "[red]does NOT match what was produced[/red]"
        )
        if ours:
            spark.stop()
        return 0 if got == reference else 1
