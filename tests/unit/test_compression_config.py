"""The ``compression.type`` topic config: Kafka's values and default; the HTTP produce path honours it."""

from __future__ import annotations

import random

import pytest

from agents.encode import ProduceRecord, RequestEncoder
from storage import records
from storage.errors import InvalidConfig
from storage.metadata.rows import TopicInfo
from storage.records import compression
from storage.topic_config import TopicConfig, effective_configs, validate_configs


def test_values_and_default_are_kafkas() -> None:
    assert effective_configs({})["compression.type"] == "producer"
    assert TopicConfig.from_overrides({}).compression_codec is None
    for name, codec in [("uncompressed", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)]:
        assert validate_configs({"compression.type": name}) == {"compression.type": name}
        assert TopicConfig.from_overrides({"compression.type": name}).compression_codec == codec
    # Kafka's validator takes the exact lower-case names; "none" is the producer's name for no codec.
    for bad in ["none", "GZIP", "lz4 ", "", "brotli", 4]:
        with pytest.raises(InvalidConfig, match=r"compression\.type"):
            validate_configs({"compression.type": bad})


@pytest.mark.parametrize("name", ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_http_produce_writes_the_topics_codec(name: str) -> None:
    config = TopicConfig.from_overrides({"compression.type": name})
    recs = [ProduceRecord(b"k", f"value {i}".encode() * 10) for i in range(20)]
    req = RequestEncoder(random.Random(1)).encode(TopicInfo("t", 1, {}, 0), config, recs, 1_700_000_000_000)
    ((batch,),) = [req.batches]
    header = next(records.iter_batches(batch.data))[0]
    expected = 0 if name == "producer" else compression.CODEC_IDS.get(name, 0)
    assert header.attributes & 0x07 == expected
    assert [r.value for r in records.decode_records(batch.data)] == [r.value for r in recs]
