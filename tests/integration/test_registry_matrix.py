"""The compatibility matrix: seven levels by three formats, through the registry's HTTP API, with ``buf
breaking`` as an independent oracle of every Protobuf verdict.

**The chains.** For each format, two chains v1, v2, v3 where each step is compatible both ways (so every
level takes v2, and v3 against v2), and v3 breaks v1 in one direction only: backward (v3 cannot read what
v1 wrote) in one chain, forward (v1 cannot read what v3 writes) in the other. The break needs a rule that
is not transitive, and each format has one:
- Avro: a field whose default comes and goes (Avro's resolution: a reader field without a default needs
  the writer to have it);
- JSON Schema: a required property whose default comes and goes (Confluent's rule: a newly required
  property with a default is compatible);
- Protobuf: a oneof that goes, with its fields, and comes back smaller or larger (Confluent's rules: a
  oneof may come or go as a whole, but one of its fields may not be removed, ONEOF_FIELD_REMOVED).

**What is checked, per level.** On a fresh subject set to the level: v1 and v2 register; then v3 is checked
against version 1 and against what the level names (``POST /compatibility/subjects/{s}/versions[/1]``,
verbose), and registered: 200, or 409 with ``error_code`` 409 and the level and the reason in its message.
The expected table is written out below (``EXPECTED``): a transitive level refuses v3 in the direction it
checks, a non-transitive one takes it, and a check against version 1 alone tells the directions apart.
A transitive level checks every live version even against one (as Karapace, registry/service.py), which
gives the same verdicts here since v3 reads and is read by v2.

**buf.** Every directional verdict of the Protobuf chains (three pairs, both directions) also goes through
``buf breaking`` with its WIRE rules (tests/registry_oracle/buf.py). buf agrees that v3 breaks v1 in the
chain's direction and only in it. It disagrees on the middle steps, for one reason, listed in
``BUF_DIFFERS``: its WIRE rules want a removed field's number reserved, where Confluent's let a oneof go
with its fields. No chain can avoid that: with nothing removed either way and types kept in one wire
class, buf's rules are transitive, so a chain breaking only at its ends must remove something.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.server import local_settings, run_server
from tests.registry_oracle.buf import buf_breaking, install_buf
from tests.unit.registry.protobuf_pairs import Pair

pytestmark = pytest.mark.integration

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
# Per level, for the chain whose v3 breaks v1 backward and for the one whose v3 breaks v1 forward: whether v3
# is compatible against version 1, and whether it is compatible against what the level names (and so
# registers).
EXPECTED = {
    "NONE": {"backward": (True, True), "forward": (True, True)},
    "BACKWARD": {"backward": (False, True), "forward": (True, True)},
    "BACKWARD_TRANSITIVE": {"backward": (False, False), "forward": (True, True)},
    "FORWARD": {"backward": (True, True), "forward": (False, True)},
    "FORWARD_TRANSITIVE": {"backward": (True, True), "forward": (False, False)},
    "FULL": {"backward": (False, True), "forward": (False, True)},
    "FULL_TRANSITIVE": {"backward": (False, False), "forward": (False, False)},
}


@dataclass(frozen=True)
class Chain:
    schema_type: str
    breaks: str  # the direction in which v3 breaks v1: "backward" or "forward"
    versions: tuple[str, str, str]
    rule: str  # the checker's name for the break, which the reasons must give


def _avro(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": list(fields)})


def _json(currency: dict[str, Any], required: bool) -> str:
    schema = {"type": "object", "properties": {"id": {"type": "string"}, "currency": currency}}
    return json.dumps({**schema, "required": ["id", "currency"] if required else ["id"]})


def _proto(body: str) -> str:
    return f'syntax = "proto3";\npackage shop;\nmessage Order {{\n  string id = 1;\n{body}}}\n'


ID = {"name": "id", "type": "string"}
CENTS = {"name": "cents", "type": "long"}
CENTS_DEFAULT = {**CENTS, "default": 0}
CURRENCY, CURRENCY_DEFAULT = {"type": "string"}, {"type": "string", "default": "EUR"}
ONE = "  oneof payment {\n    string card = 2;\n  }\n"
TWO = "  oneof payment {\n    string card = 2;\n    string iban = 3;\n  }\n"

CHAINS = (
    Chain(
        "AVRO", "backward", (_avro(ID), _avro(ID, CENTS_DEFAULT), _avro(ID, CENTS)), "reader_field_missing"
    ),
    Chain("AVRO", "forward", (_avro(ID, CENTS), _avro(ID, CENTS_DEFAULT), _avro(ID)), "reader_field_missing"),
    Chain(
        "JSON",
        "backward",
        (_json(CURRENCY, False), _json(CURRENCY_DEFAULT, True), _json(CURRENCY, True)),
        "REQUIRED_ATTRIBUTE_ADDED",
    ),
    Chain(
        "JSON",
        "forward",
        (_json(CURRENCY, True), _json(CURRENCY_DEFAULT, True), _json(CURRENCY, False)),
        "REQUIRED_ATTRIBUTE_ADDED",
    ),
    Chain("PROTOBUF", "backward", (_proto(TWO), _proto(""), _proto(ONE)), "ONEOF_FIELD_REMOVED"),
    Chain("PROTOBUF", "forward", (_proto(ONE), _proto(""), _proto(TWO)), "ONEOF_FIELD_REMOVED"),
)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = local_settings(tmp_path_factory.mktemp("matrix"))
    with run_server(settings) as srv, httpx.Client(base_url=srv.registry_url, timeout=30) as client:
        yield client


def _post(registry: httpx.Client, path: str, chain: Chain, text: str) -> httpx.Response:
    return registry.post(path, json={"schema": text, "schemaType": chain.schema_type})


def _compatible(registry: httpx.Client, path: str, chain: Chain) -> bool:
    """The verdict of a compatibility check of v3; its reasons must name the chain's rule and direction."""
    answer = _post(registry, f"{path}?verbose=true", chain, chain.versions[2])
    assert answer.status_code == 200, answer.text
    body = answer.json()
    if not body["is_compatible"]:
        assert any(m.startswith(chain.breaks) and chain.rule in m for m in body["messages"]), body
    return bool(body["is_compatible"])


def _walk(registry: httpx.Client, chain: Chain, level: str) -> tuple[bool, bool]:
    """The chain on a fresh subject at ``level``: (v3 compatible against version 1, against the level)."""
    subject = f"{chain.schema_type}-{chain.breaks}-{level}".lower()
    put = registry.put(f"/config/{subject}", json={"compatibility": level})
    assert put.json() == {"compatibility": level}, put.text
    for text in chain.versions[:2]:
        registered = _post(registry, f"/subjects/{subject}/versions", chain, text)
        assert registered.status_code == 200, (level, registered.text)
    against_v1 = _compatible(registry, f"/compatibility/subjects/{subject}/versions/1", chain)
    against_level = _compatible(registry, f"/compatibility/subjects/{subject}/versions", chain)
    registered = _post(registry, f"/subjects/{subject}/versions", chain, chain.versions[2])
    if against_level:
        assert (registered.status_code, registered.json()["version"]) == (200, 3), registered.text
    else:
        body = registered.json()
        assert (registered.status_code, body["error_code"]) == (409, 409), registered.text
        assert body["message"].startswith(f"Incompatible schema, compatibility_mode={level}."), body
        assert chain.rule in body["message"], body
    versions = registry.get(f"/subjects/{subject}/versions").json()
    assert versions == ([1, 2, 3] if against_level else [1, 2]), versions
    return against_v1, against_level


@pytest.mark.parametrize("schema_type", ["AVRO", "JSON", "PROTOBUF"])
def test_seven_levels(registry: httpx.Client, schema_type: str) -> None:
    chains = [chain for chain in CHAINS if chain.schema_type == schema_type]
    observed = {level: {chain.breaks: _walk(registry, chain, level) for chain in chains} for level in LEVELS}
    assert observed == EXPECTED


# The directional verdicts of the Protobuf chains where buf's WIRE rules and Confluent's differ, by (chain,
# new version, old version, direction); each must still differ, so that the list cannot go stale.
_RESERVED = (
    "buf WIRE wants a removed field's number reserved (FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED); Confluent "
    "lets a oneof go with its fields (ONEOF_REMOVED)"
)
BUF_DIFFERS = {
    ("backward", 2, 1, "backward"): _RESERVED,  # v2 drops v1's oneof
    ("backward", 3, 2, "forward"): _RESERVED,  # read by v2, v3's oneof is gone
    ("forward", 2, 1, "backward"): _RESERVED,
    ("forward", 3, 2, "forward"): _RESERVED,
}


@pytest.mark.parametrize("chain", [c for c in CHAINS if c.schema_type == "PROTOBUF"], ids=lambda c: c.breaks)
def test_buf_agrees_with_the_protobuf_chains(chain: Chain, tmp_path: Path) -> None:
    buf = install_buf()
    disagreements = {}
    for new, old in ((2, 1), (3, 2), (3, 1)):
        for direction in ("backward", "forward"):
            # BACKWARD asks whether the new schema reads what the old one wrote: buf's NEW --against OLD.
            reader, writer = (new, old) if direction == "backward" else (old, new)
            pair = Pair(
                f"v{new} v{old} {direction}", chain.versions[writer - 1], chain.versions[reader - 1], ()
            )
            workdir = tmp_path / pair.name.replace(" ", "-")
            workdir.mkdir()
            findings = buf_breaking(buf, workdir, pair)
            compatible = not ((new, old) == (3, 1) and direction == chain.breaks)  # the chain's shape
            if compatible != (not findings):
                disagreements[(chain.breaks, new, old, direction)] = findings
    expected = {key for key in BUF_DIFFERS if key[0] == chain.breaks}
    assert set(disagreements) == expected, disagreements
