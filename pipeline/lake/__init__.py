"""Topics as Apache Iceberg tables: the lake writer, run by the worker role after each compaction round.

- ``table_layout``: the raw table's Iceberg schema (Spark's Kafka source columns) and partition specs;
- ``offsets``: the offsets a table holds, from its snapshot summaries (``strata.offsets``);
- ``source``: one commit's read of a topic (read_committed, capped in bytes), decoded to Arrow;
- ``writer``: one job per table: lease, read, append and commit data and offsets in one snapshot;
- ``round``: which tables are due, and the tables of deleted topics;
- ``runs``: a writer's settings and the outcome of a run;
- ``hooks``: the point between the Parquet upload and the catalog commit, for watching and fault injection;
- ``layouts``: the typed and dead-letter layouts, and a raw batch turned into them (``registry/columns``);
- ``upsert``: a compacted topic's state table, kept by copy-on-write of the key buckets a commit touches;
- ``state_writer``: the writer's commit of the state table ``<table>_state``, with its own offsets;
- ``table_properties``: the properties every lake table carries (its topic, no commit retry);
- ``backfill``: a large topic's records written as Parquet by Spark, for ``add_files`` with their offsets;
- ``backfill_run``: ``strata lake backfill``: those files committed under the writer's lease.

Built and run today: raw tables, state tables (``strata.iceberg.upsert``) and the Spark backfill.
``layouts`` is the part of the typed tables that the writer does not call yet.

The catalog is pyiceberg's SQL catalog on Strata's metadata database (``storage/lake_catalog.py``); the
topic configs are ``strata.iceberg.*`` (``storage/lake_config.py``). pyiceberg and pyarrow are
imported only when a lake job runs, so processes without lake-enabled topics never load them.
"""
