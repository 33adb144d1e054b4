"""Response models of the endpoints the web console reads beside the core API: the cluster view, the
agent's metrics history and the record browser. They are public API like the rest (OpenAPI at /docs)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class AgentOut(BaseModel):
    node_id: int
    host: str
    port: int = Field(description="Kafka port the agent advertises (-1: no Kafka listener)")


class ThisAgentOut(BaseModel):
    node_id: int
    host: str
    http_port: int
    kafka_port: int | None
    role: str


class MetadataHealthOut(BaseModel):
    backend: str = Field(description="sqlite or postgresql")
    ok: bool
    latency_ms: float | None = Field(description="time to list the topics, the health probe")
    error_code: int | None = None
    message: str | None = None


class ObjectStoreOut(BaseModel):
    kind: Literal["file", "s3"]
    bucket: str


class ClusterOut(BaseModel):
    this_agent: ThisAgentOut
    cluster_mode: bool = Field(description="--kafka-cluster: agents sharing the store form one cluster")
    agents: list[AgentOut]
    topics: int | None = Field(description="number of topics (None when the metadata store is down)")
    metadata: MetadataHealthOut
    object_store: ObjectStoreOut


class PricesOut(BaseModel):
    put_per_1000: float = Field(description="USD per 1,000 PUT-class requests (PUT, POST, LIST)")
    get_per_1000: float = Field(description="USD per 1,000 GET-class requests (GET, HEAD)")
    storage_per_gb_month: float = Field(description="USD per GiB stored for a month")


class LakePointOut(BaseModel):
    """What the lake adds, for the whole cluster (every worker's lake rounds, from the metadata store),
    not for this agent: its tables' requests and what they hold."""

    puts_per_s: float | None = Field(
        description="PUT-class requests (PUT, multipart POSTs, LIST) per second; null on the first read"
    )
    gets_per_s: float | None = Field(description="GET-class requests (GET, HEAD) per second; likewise")
    monthly_cost_usd: float | None = Field(description="those request rates over a 30-day month")
    stored_bytes: int = Field(description="bytes the lake's tables hold (tables not yet listed: none)")
    stored_objects: int
    storage_monthly_usd: float = Field(description="what storing those bytes for a month costs")


class MetricsPointOut(BaseModel):
    ts_ms: int
    produce_mib_s: float
    fetch_mib_s: float
    produce_p50_ms: float | None
    produce_p99_ms: float | None
    puts_per_s: float
    gets_per_s: float
    monthly_cost_usd: float = Field(description="the interval's request rates over a 30-day month")
    flush_puts_per_s: dict[str, float] = Field(
        description="flush PUTs per second by the flush class whose rule cut them (standard, low-latency)"
    )
    flush_monthly_cost_usd: dict[str, float] = Field(
        description="each flush class's PUTs over a 30-day month at the PUT price"
    )
    lake: LakePointOut | None = Field(
        default=None, description="the lake's figures; null when they could not be read for this point"
    )


class MetricsHistoryOut(BaseModel):
    interval_ms: int
    prices: PricesOut
    points: list[MetricsPointOut]


class BrowseHeaderOut(BaseModel):
    name: str
    value: str | None = Field(description="base64")


class TypedOut(BaseModel):
    """A key or value framed with a schema id (Confluent's wire format), decoded or not."""

    schema_id: int = Field(description="the id it is framed with")
    schema_type: str | None = Field(description="AVRO, PROTOBUF or JSON")
    subject: str | None = Field(description="a subject holding the id that the reader may read")
    version: int | None = Field(description="that subject's version with the id")
    json_value: Any = Field(
        default=None,
        alias="json",
        description="the decoded value as JSON (Avro's JSON encoding, protobuf's JSON mapping)",
    )
    error: str | None = Field(description="why it was not decoded (null: decoded)")

    model_config = {"populate_by_name": True, "serialize_by_alias": True}


class BrowseRecordOut(BaseModel):
    partition: int
    offset: int
    timestamp: int
    key: str | None = Field(description="base64; null for a null key")
    value: str | None = Field(description="base64; null for a tombstone")
    headers: list[BrowseHeaderOut]
    key_typed: TypedOut | None = Field(
        default=None,
        description="the key decoded with its schema; null when it is not framed with a schema id",
    )
    value_typed: TypedOut | None = Field(
        default=None,
        description="the value decoded with its schema; null when it is not framed with a schema id",
    )


class GapOut(BaseModel):
    partition: int
    first: int = Field(description="first missing offset")
    last: int = Field(description="last missing offset (inclusive)")


class PositionOut(BaseModel):
    partition: int
    next_offset: int
    log_start_offset: int
    high_watermark: int


class BrowseOut(BaseModel):
    records: list[BrowseRecordOut]
    gaps: list[GapOut] = Field(description="offsets inside the scanned ranges that hold no record")
    positions: list[PositionOut] = Field(description="where the scan stopped, per partition")
    cursor: str = Field(description="pass back as `cursor` to continue (live tail, next page)")
    scanned: int = Field(description="records read, filters aside")
    exhausted: bool = Field(description="every partition was read up to its high watermark")
