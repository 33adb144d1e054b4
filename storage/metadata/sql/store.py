"""``SqlMetadataStore``: every role of ``storage.metadata.base``, one query module each, over one backend."""

from __future__ import annotations

from storage.metadata.base import MetadataStore
from storage.metadata.sql.agents import AgentQueries
from storage.metadata.sql.compaction import CompactionQueries
from storage.metadata.sql.damage import DamageQueries
from storage.metadata.sql.files import FileQueries
from storage.metadata.sql.flush import FlushQueries
from storage.metadata.sql.jobs import JobQueries
from storage.metadata.sql.lake import LakeQueries
from storage.metadata.sql.lake_usage import LakeUsageQueries
from storage.metadata.sql.producers import ProducerQueries
from storage.metadata.sql.reads import ReadQueries
from storage.metadata.sql.schemas import SchemaQueries
from storage.metadata.sql.security import SecurityQueries
from storage.metadata.sql.stats import StatsQueries
from storage.metadata.sql.topics import TopicQueries
from storage.metadata.sql.transactions import TransactionQueries
from storage.metadata.sql.txn_reads import TransactionReads


class SqlMetadataStore(
    TopicQueries,  # TopicReader, AdminStore (topics)
    TransactionQueries,  # TransactionStore; a GroupQueries (groups)
    TransactionReads,  # TransactionStore (describes), LogStore and CompactionCatalog (markers, aborted)
    FlushQueries,  # LogStore (commit_flush, idempotency)
    ReadQueries,  # LogStore (find_chunks), CompactionCatalog (reads)
    JobQueries,  # CompactionCatalog (jobs)
    CompactionQueries,  # CompactionCatalog (commit_compaction, apply_retention)
    StatsQueries,  # StatsReader, CompactionCatalog (dirty-ratio samples)
    FileQueries,  # FileCatalog
    ProducerQueries,  # ProducerStore
    AgentQueries,  # AgentRegistry
    DamageQueries,  # DamageLog
    SecurityQueries,  # SecurityStore
    SchemaQueries,  # SchemaStore (the schema registry)
    LakeQueries,  # LakeStore (the lake writers)
    LakeUsageQueries,  # LakeStore (what the lake costs)
    MetadataStore,
):
    """``MetadataStore`` over any ``Backend``. Thread-safe: every call is one backend transaction.

    The query modules share only ``SqlBase`` (backend, dialect) and the helpers in ``core``.
    """
