"""Reader options with the names and JSON formats of Spark's Kafka source. Pure parsing, no Spark.

- ``subscribe``: "t1,t2" (every partition of each topic); or ``assign``: '{"t1":[0,1],"t2":[2]}'.
- ``startingOffsets``: "earliest" (default) | "latest" | '{"t1":{"0":23,"1":-2}}' where -2 = earliest
  and -1 = latest; partitions not named start at earliest.
- ``endingOffsets``: "latest" (default) | '{"t1":{"0":50,"1":-1}}' (-1 = latest; exclusive, as in Kafka).
- ``includeHeaders``: "true"/"false".
- ``failOnDataLoss``: "true" (default) / "false", as in Spark's Kafka source: a chunk whose stored bytes
  fail their checks fails the read, or with "false" is skipped (what precedes the damage is kept) and
  logged with its range.
- ``kafka.isolation.level``: "read_committed" (default) | "read_uncommitted", the name Spark's Kafka source
  passes to its consumer. read_committed reads below each partition's last stable offset (LSO) and drops
  the batches of aborted transactions; read_uncommitted reads every stored record up to the high
  watermark. The default differs from Spark's Kafka source, whose consumer defaults to read_uncommitted:
  Strata's reader serves what its Kafka and HTTP doors serve by default, committed data.

Every bad value raises ``InvalidReadOption`` naming the option, as Spark's Kafka source fails fast.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from storage.errors import InvalidReadOption as InvalidReadOption  # re-exported: callers import it from here
from storage.topic_config import validate_topic_name

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True, slots=True)
class ReadOptions:
    topics: tuple[str, ...] = ()  # subscribe
    assign: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # assign
    starting: str | Mapping[str, Mapping[int, int]] = "earliest"
    ending: str | Mapping[str, Mapping[int, int]] = "latest"
    include_headers: bool = False
    fail_on_data_loss: bool = True
    read_committed: bool = True  # kafka.isolation.level


ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
_KNOWN = {
    "subscribe",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "includeheaders",
    "failondataloss",
    "kafka.isolation.level",
}


def parse_options(options: Mapping[str, object]) -> ReadOptions:
    # Spark's option names are case-insensitive.
    lowered = {str(k).lower(): v for k, v in options.items()}
    unknown = set(lowered) - _KNOWN
    if unknown:
        raise InvalidReadOption(f"unknown option(s) {sorted(unknown)}; known: {sorted(_KNOWN)}")
    subscribe, assign = lowered.get("subscribe"), lowered.get("assign")
    if (subscribe is None) == (assign is None):
        raise InvalidReadOption("give exactly one of 'subscribe' and 'assign'")
    topics: tuple[str, ...] = ()
    assigned: dict[str, tuple[int, ...]] = {}
    if subscribe is not None:
        topics = tuple(validate_topic_name(t.strip()) for t in _text("subscribe", subscribe).split(","))
    else:
        raw = _json("assign", assign)
        if not isinstance(raw, dict) or not raw:
            raise InvalidReadOption('assign must be a JSON object like {"topic":[0,1]}')
        for topic, parts in raw.items():
            if not isinstance(parts, list) or not all(type(p) is int and p >= 0 for p in parts):
                raise InvalidReadOption(f"assign: partitions of {topic!r} must be a list of integers >= 0")
            assigned[validate_topic_name(topic)] = tuple(sorted(set(parts)))
    return ReadOptions(
        topics=topics,
        assign=assigned,
        starting=_offsets("startingOffsets", lowered.get("startingoffsets", "earliest"), ending=False),
        ending=_offsets("endingOffsets", lowered.get("endingoffsets", "latest"), ending=True),
        include_headers=_bool("includeHeaders", lowered.get("includeheaders", False)),
        fail_on_data_loss=_bool("failOnDataLoss", lowered.get("failondataloss", True)),
        read_committed=_isolation(lowered.get("kafka.isolation.level", "read_committed")),
    )


def _text(name: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidReadOption(f"{name} must be a non-empty string")
    return value


def _json(name: str, value: object) -> object:
    try:
        return json.loads(_text(name, value))
    except json.JSONDecodeError as exc:
        raise InvalidReadOption(f"{name} is not valid JSON: {exc.msg}") from None


def _bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InvalidReadOption(f"{name} must be true or false")


def _isolation(value: object) -> bool:
    """Whether ``kafka.isolation.level`` asks for read_committed."""
    level = value.strip().lower() if isinstance(value, str) else value
    if level not in ISOLATION_LEVELS:
        raise InvalidReadOption(
            f"kafka.isolation.level must be read_committed (the default) or read_uncommitted, not {value!r}"
        )
    return level == "read_committed"


def _offsets(name: str, value: object, *, ending: bool) -> str | dict[str, dict[int, int]]:
    text = _text(name, value)
    allowed = ("latest",) if ending else ("earliest", "latest")
    if text.strip().lower() in allowed:
        return text.strip().lower()
    raw = _json(name, text)
    if not isinstance(raw, dict):
        raise InvalidReadOption(
            f"{name} must be one of {allowed} or a JSON object of topic -> partition -> offset"
        )
    out: dict[str, dict[int, int]] = {}
    for topic, parts in raw.items():
        if not isinstance(parts, dict):
            raise InvalidReadOption(f"{name}: offsets of {topic!r} must be an object of partition -> offset")
        out[validate_topic_name(topic)] = {}
        for partition, offset in parts.items():
            if not str(partition).isdigit() or type(offset) is not int:
                raise InvalidReadOption(
                    f"{name}: {topic}/{partition} -> {offset!r} is not partition -> offset"
                )
            lowest = LATEST if ending else EARLIEST
            if offset < lowest:
                raise InvalidReadOption(
                    f"{name}: {topic}/{partition} offset {offset} is invalid "
                    f"({'-1 = latest' if ending else '-2 = earliest, -1 = latest'})"
                )
            out[topic][int(partition)] = offset
    return out
