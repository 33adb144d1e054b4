"""Comparing two sides' answers, and the divergences that are intended."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

from tests.differential.divergences import INTENDED, Divergence


@dataclass(frozen=True)
class Difference:
    path: str  # scenario/step/field/... with list indexes as [i]
    kafka: Any
    strata: Any
    intended: Divergence | None


MISSING = "<absent>"


def differences(path: str, kafka: Any, strata: Any) -> list[Difference]:
    """Every leaf where the answers differ, each matched against the intended divergences."""
    out: list[Difference] = []
    _walk(path, kafka, strata, out)
    return out


# Fields that identify an entry of a list: an answer lists topics, partitions and configs in an order the
# protocol does not pin (Kafka answers ListOffsets partitions in its own order), and clients match them
# by these.
_IDENTITY = ("name", "partition_index", "index", "partition", "group_id", "resource_name")


def _by_name(items: Any) -> Any:
    """A list of identified entries as a dict by identity, so that order does not count and one missing
    entry is one difference, not a shifted list; other values as they are."""
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        return items
    for key in _IDENTITY:
        if all(key in i for i in items) and len({i[key] for i in items}) == len(items):
            return {f"{key}={i[key]}" if key != "name" else i[key]: i for i in items}
    return items


def _walk(path: str, kafka: Any, strata: Any, out: list[Difference]) -> None:
    kafka, strata = _by_name(kafka), _by_name(strata)
    if isinstance(kafka, dict) and isinstance(strata, dict):
        for key in list(kafka) + [k for k in strata if k not in kafka]:
            _walk(f"{path}/{key}", kafka.get(key, MISSING), strata.get(key, MISSING), out)
        return
    if isinstance(kafka, list) and isinstance(strata, list) and len(kafka) == len(strata):
        for i, (a, b) in enumerate(zip(kafka, strata, strict=True)):
            _walk(f"{path}[{i}]", a, b, out)
        return
    if kafka != strata:
        out.append(Difference(path, kafka, strata, intended(path)))


def intended(path: str) -> Divergence | None:
    for divergence in INTENDED:
        if any(fnmatch.fnmatchcase(path, pattern) for pattern in divergence.paths):
            return divergence
    return None
