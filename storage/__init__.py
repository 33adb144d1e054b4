"""Everything about bytes and durability, and nothing about HTTP or Kafka framing: the bottom layer.

- ``records/``: Kafka's RecordBatch v2 codec (layout, reference decoder and encoder, the compiled twin,
  compaction's scans, compression), sans-IO.
- ``fileformat/``: the multi-partition file one flush writes: chunks sorted by (topic, partition), a
  footer indexing them, a trailer. Sans-IO.
- ``objectstore/``: the ``ObjectStore`` interface (a local directory, S3 through boto3 and aiobotocore),
  chosen by URL, with request counters, retries and fault injection for tests.
- ``metadata/``: the source of truth for which bytes are live: role Protocols (``base.py``), rows
  (``rows.py``), one SQL implementation on SQLite and PostgreSQL (``sql/``), migrations (``schema.py``).
- ``errors.py``: one error type per failure kind, with its stable code and retriability; ``clock.py``
  (injected time), ``keys.py`` (object keys), ``partitioner.py`` (Kafka's murmur2), ``topic_config.py``
  (Kafka's topic configs and names).

It imports no other Strata package.
"""
