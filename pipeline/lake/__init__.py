"""Topics as Apache Iceberg tables: the lake writer, run by the worker role after each compaction round.

- ``table_layout``: the raw table's Iceberg schema (Spark's Kafka source columns), the dead-letter table's
  and partition specs;
- ``offsets``: the offsets a table holds, from its snapshot summaries (``strata.offsets``);
- ``source``: one commit's read of a topic (read_committed, capped in bytes), decoded to Arrow in pieces;
- ``append``: a commit's pieces written as data files as they come, appended in one snapshot;
- ``memory``: why the writer's pyarrow allocates on the system allocator;
- ``writer``: one job per table: lease, read, append and commit data and offsets in one snapshot;
- ``round``: which tables are due (an interval after their last run began, at once when behind), and the
  tables of deleted topics;
- ``maintenance``: small-file rewrite (``rewrite``), snapshot expiry, orphan cleanup; run by the round;
- ``runs``: a writer's settings and the outcome of a run;
- ``hooks``: the point between the Parquet upload and the catalog commit, for watching and fault injection;
- ``metrics``: every ``strata_lake_*`` Prometheus metric, one observer a round reports to (runs, lag, the
  gap, maintenance, the requests and stored bytes);
- ``meter``: the requests pyiceberg sends, counted by ``counting_io`` (a FileIO whose filesystem counts
  each operation's S3 requests) and attributed to a topic by the round's scopes;
- ``footprint``: what a topic's tables hold, by listing their locations;
- ``layouts``: the typed and dead-letter layouts, and a raw batch turned into them (``registry/columns``);
- ``typed_writer``: a typed table's commit: the schema lookup, the typed rows and the schema evolution;
- ``dead_letters``: the dead-letter table ``<table>_dlq``, committed first with offsets of its own;
- ``upsert``: a compacted topic's state table, kept by copy-on-write of the key buckets a commit touches;
- ``state_writer``: the writer's commit of the state table ``<table>_state``, with its own offsets;
- ``table_properties``: the properties every lake table carries (its topic, no commit retry);
- ``backfill``: a large topic's records written as Parquet by Spark, for ``add_files`` with their offsets;
- ``backfill_run``: ``strata lake backfill``: those files committed under the writer's lease.

Built and run today: raw and typed tables with typed tables' dead letters, state tables
(``strata.iceberg.upsert``), the Spark backfill (``strata lake backfill``) and table maintenance.

The catalog is pyiceberg's SQL catalog on Strata's metadata database (``storage/lake_catalog.py``); the
topic configs are ``strata.iceberg.*`` (``storage/lake_config.py``). pyiceberg and pyarrow are
imported only when a lake job runs, so processes without lake-enabled topics never load them.
"""
