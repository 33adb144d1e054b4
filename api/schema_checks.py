"""Validation on produce at the HTTP door: an encoded produce request checked against the schema registry
(registry/validate.py) where the door hands it to the agent, before it is buffered.

The check reads the batches the agent encoded (decompressed when the topic's ``compression.type`` made the
agent compress them), with the same C walk and rules as the Kafka door, so the two doors accept the same
records. The request is refused as a whole with ``SchemaValidationFailed`` (42220), naming the first
failing record by its index in the request (found through the request's order: records are spread over
one batch per partition) and the reason.

The check runs on the event loop from the schema cache alone; when that cannot answer (a schema not seen
yet, a stale subject list, a refusal to confirm) it runs again in a thread, which reads the metadata store.
Only that path awaits inside the handler's parse window (api/routes/records.py): the body and its parsed
records are dropped by then, and the window's reservation still counts what the encoded request holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from agents.buffer import ProduceRequest
from agents.offsets import order_pairs
from registry.verdicts import FieldRule, RecordRefused, SchemaValidator, Tally, Unresolved, rules_of
from storage import records
from storage.errors import SchemaValidationFailed
from storage.topic_config import TopicConfig


async def check_schemas(
    validator: SchemaValidator | None, topic: str, config: TopicConfig, request: ProduceRequest
) -> None:
    """Raises SchemaValidationFailed unless every record of ``request`` passes the topic's validation."""
    rules = rules_of(config)
    if not rules:
        return
    if validator is None:
        raise SchemaValidationFailed(f"topic {topic!r} validates schemas; this agent has no registry")
    try:
        _check(validator, topic, rules, request, False)
    except Unresolved:
        await asyncio.to_thread(_check, validator, topic, rules, request, True)


def _check(
    validator: SchemaValidator, topic: str, rules: Sequence[FieldRule], request: ProduceRequest, load: bool
) -> None:
    tally = Tally()
    refused: list[tuple[int, int, RecordRefused]] = []  # (batch, record in it, refusal)
    for b, batch in enumerate(request.batches):
        header = records.read_header(batch.data, 0, False)
        data, start, end = records.expand_records(batch.data, header)
        count, last_delta = header.records_count, header.last_offset_delta
        try:
            validator.check(topic, rules, data, start, end, count, last_delta, load=load, tally=tally)
        except RecordRefused as exc:
            refused.append((b, exc.index, exc))
    validator.record(tally)
    if not refused:
        return
    # A batch's records keep the request's order, so each batch's first failure is its earliest one; the
    # request's first failing record is the earliest of those.
    positions = {pair: i for i, pair in enumerate(order_pairs(request.order))}
    index, first = min(((positions[(b, r)], why) for b, r, why in refused), key=lambda found: found[0])
    raise SchemaValidationFailed(f"record {index}: {first.reason}", index)
