"""The copier's check, after Kafka's TransactionsTest: the output is the input, each value exactly once.

* ``copy-duplicate``: an input value appears in the output at more than one offset.
* ``copy-lost``: an input value is missing from the output.
* ``copy-phantom``: an output value that was never an input.
* ``copy-order`` (only when asked, with one output partition): the values that came from one input
  partition appear in the output partition in another order than in the input. A copier consumes its input
  partition in offset order and commits in order, so any reordering means a record was copied twice or out
  of its transaction.
* ``group-offsets``: the copiers' group has committed, for an input partition, an offset other than that
  partition's end. Offsets commit with the output in one transaction, so once the copiers have copied
  everything the committed offset is exactly the end; any other value means offsets and output disagree.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from tests.eos.checker import Verdict
from tests.eos.history import Record

COPY_DUPLICATE = "copy-duplicate"
COPY_LOST = "copy-lost"
COPY_PHANTOM = "copy-phantom"
COPY_ORDER = "copy-order"
GROUP_OFFSETS = "group-offsets"


def check_copy(
    inputs: Mapping[int, Sequence[int]],
    output: Iterable[Record],
    *,
    ordered: bool = False,
    committed: Mapping[int, int] | None = None,
    label: str = "output",
) -> Verdict:
    """``inputs``: each input partition's values in offset order; ``output``: the records read from the output
    topic (any number of partitions); ``committed``: the group's committed offset per input partition."""
    verdict = Verdict()
    source = {v: p for p, values in inputs.items() for v in values}
    records = sorted(output, key=lambda r: (r.partition, r.offset))
    counts = Counter(r.value for r in records)
    for value, n in sorted(counts.items()):
        if n > 1:
            where = [[r.partition, r.offset] for r in records if r.value == value]
            verdict.add(COPY_DUPLICATE, {"in": label, "value": value, "at": where})
        if value not in source:
            verdict.add(COPY_PHANTOM, {"in": label, "value": value})
    for value in sorted(set(source) - set(counts)):
        verdict.add(COPY_LOST, {"in": label, "value": value, "input_partition": source[value]})
    if ordered:
        _order(inputs, records, source, verdict, label)
    for partition, offset in sorted((committed or {}).items()):
        end = len(inputs.get(partition, ()))
        if offset != end:
            verdict.add(GROUP_OFFSETS, {"input_partition": partition, "committed": offset, "end": end})
    verdict.stats = {
        f"{label}_records": len(records),
        f"{label}_distinct": len(counts),
        "inputs": len(source),
    }
    return verdict


def _order(
    inputs: Mapping[int, Sequence[int]],
    records: list[Record],
    source: dict[int, int],
    verdict: Verdict,
    label: str,
) -> None:
    position = {v: i for values in inputs.values() for i, v in enumerate(values)}
    last: dict[tuple[int, int], int] = defaultdict(lambda: -1)  # (output partition, input partition) -> index
    for r in records:
        if r.value not in source:
            continue
        key = (r.partition, source[r.value])
        if position[r.value] <= last[key]:
            verdict.add(
                COPY_ORDER,
                {"in": label, "value": r.value, "at": [r.partition, r.offset], "after_index": last[key]},
            )
        last[key] = max(last[key], position[r.value])
