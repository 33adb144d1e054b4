"""Spark reads committed data by default (``kafka.isolation.level``), with both decoders: transactions
written by confluent-kafka (librdkafka) through an agent's Kafka door, committed, aborted (stored first),
interleaved across producers, and one left open; Spark's rows are held to a Kafka consumer's at the same
isolation level."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from pipeline.reader import read_topic
from tests.fixtures.server import local_settings, run_server
from tests.kafka.test_transactions import consume_all, producer

pytestmark = pytest.mark.integration

TOPIC = "txn-spark"


def _write(bootstrap: str) -> None:
    """Partition 0: a committed transaction (c0-c2); producer A's aborted one (a0, a1; a2 on partition 1)
    around producer B's committed b0, so A's aborted range holds a committed batch of B; plain records;
    then B's transaction left open (open0, open1: the LSO of both partitions), and records past it: plain
    ones, and a transaction of A committed after B's began."""
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    a, b = producer(bootstrap, "spark-a"), producer(bootstrap, "spark-b")
    a.init_transactions(30)
    b.init_transactions(30)
    a.begin_transaction()
    for i in range(3):
        a.produce(TOPIC, value=b"c%d" % i, partition=0)
    a.commit_transaction(30)
    a.begin_transaction()
    a.produce(TOPIC, value=b"a0", partition=0)
    a.produce(TOPIC, value=b"a1", partition=0)
    a.produce(TOPIC, value=b"a2", partition=1)
    a.flush(30)
    b.begin_transaction()
    b.produce(TOPIC, value=b"b0", partition=0)
    b.commit_transaction(30)
    a.flush(30)  # stored, then aborted (librdkafka's abort drops what it has not sent yet)
    a.abort_transaction(30)
    plain.produce(TOPIC, value=b"plain0", partition=0)
    plain.produce(TOPIC, value=b"q0", partition=1)
    plain.flush(30)
    b.begin_transaction()
    b.produce(TOPIC, value=b"open0", partition=0)
    b.produce(TOPIC, value=b"open1", partition=1)
    b.flush(30)  # stored; the transaction stays open
    plain.produce(TOPIC, value=b"after0", partition=0)
    plain.produce(TOPIC, value=b"after1", partition=1)
    plain.flush(30)
    a.begin_transaction()
    a.produce(TOPIC, value=b"late", partition=0)
    a.commit_transaction(30)


def _spark_rows(
    spark: Any, metadata_url: str, bucket_url: str, **options: Any
) -> list[tuple[int, int, bytes]]:
    df = read_topic(spark, metadata_url, bucket_url, subscribe=TOPIC, **options)
    return sorted(
        (r.partition, r.offset, bytes(r.value)) for r in df.select("partition", "offset", "value").collect()
    )


def test_spark_reads_committed_data_by_default_with_both_decoders(spark: Any, tmp_path: Path) -> None:
    with run_server(local_settings(tmp_path)) as srv:
        srv.create_topic(TOPIC, partitions=2)
        _write(srv.kafka_bootstrap)
        committed = sorted(consume_all(srv.kafka_bootstrap, TOPIC, "read_committed", partitions=2))
        everything = sorted(consume_all(srv.kafka_bootstrap, TOPIC, "read_uncommitted", partitions=2))
        assert [v for _, _, v in committed] == [b"c0", b"c1", b"c2", b"b0", b"plain0", b"q0"]
        assert {v for _, _, v in everything} == {
            *(b"c0", b"c1", b"c2", b"a0", b"a1", b"b0", b"plain0", b"open0", b"after0", b"late"),
            *(b"a2", b"q0", b"open1", b"after1"),
        }
        states = {s.partition: s for s in srv.runtime.metadata.partition_states(TOPIC)}
        assert all(s.last_stable_offset < s.high_watermark for s in states.values())  # B is still open
        metadata_url, bucket_url = srv.runtime.settings.metadata_url, srv.runtime.settings.bucket_url
        for decoder in ("jvm", "python"):
            assert _spark_rows(spark, metadata_url, bucket_url, decoder=decoder) == committed, decoder
            assert (
                _spark_rows(
                    spark,
                    metadata_url,
                    bucket_url,
                    decoder=decoder,
                    **{"kafka.isolation.level": "read_committed"},
                )
                == committed
            )
            uncommitted = _spark_rows(
                spark,
                metadata_url,
                bucket_url,
                decoder=decoder,
                **{"KAFKA.ISOLATION.LEVEL": "read_uncommitted"},
            )
            assert uncommitted == everything, decoder
            # "latest" is the LSO: from there on nothing is committed yet.
            assert (
                _spark_rows(spark, metadata_url, bucket_url, decoder=decoder, startingOffsets="latest") == []
            )
            late = _spark_rows(
                spark,
                metadata_url,
                bucket_url,
                decoder=decoder,
                startingOffsets=f'{{"{TOPIC}":{{"0":{states[0].last_stable_offset}}}}}',
                endingOffsets="latest",
                **{"kafka.isolation.level": "read_uncommitted"},
            )
            assert [v for p, _, v in late if p == 0] == [b"open0", b"after0", b"late"]
