"""The HTTP API's models of Kafka transactions (api/routes/transactions.py)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class TxnPartitionOut(BaseModel):
    topic: str
    partition: int
    first_offset: int | None = Field(
        description="where the transaction begins here; null: nothing written yet"
    )


class TransactionOut(BaseModel):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str = Field(description="Kafka's names: Empty, Ongoing, CompleteCommit, CompleteAbort")
    timeout_ms: int
    started_ms: int | None = Field(description="when the open transaction began; null unless Ongoing")
    age_ms: int | None
    hanging: bool = Field(
        description="open past its timeout: it holds read_committed readers of its partitions until the"
        " timeout sweep (every second, on any agent) or an operator aborts it"
    )
    partitions: list[TxnPartitionOut]
    groups: list[str]


class TransactionListOut(BaseModel):
    transactions: list[TransactionOut]
