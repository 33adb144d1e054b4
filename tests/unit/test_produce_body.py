"""api/produce_body.py against api/models.py's ProduceIn, the schema OpenAPI documents: for any JSON body,
the compiled parser accepts exactly what the model accepts, and gives the same records."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from api.models import ProduceIn
from api.produce_body import is_json, parse_produce_body
from storage.errors import BadRequest, InvalidPayload, StrataError
from tests.examples import examples

_text = st.one_of(st.none(), st.text(max_size=8), st.integers(-2, 2), st.booleans())
_header = st.fixed_dictionaries(
    {"name": st.one_of(st.text(max_size=4), st.integers(0, 3))},
    optional={"value": _text, "extra": st.integers()},
)
_record = st.fixed_dictionaries(
    {},
    optional={
        "key": _text,
        "value": _text,
        "headers": st.one_of(st.lists(_header, max_size=3), st.none(), st.text(max_size=2)),
        "partition": st.one_of(
            st.none(), st.integers(-2, 2**31), st.floats(allow_nan=False), st.text(max_size=2)
        ),
        "timestamp": st.one_of(st.none(), st.integers(-2, 2**64), st.text(max_size=2)),
        "offset": st.integers(),
    },
)
_valid_record = st.fixed_dictionaries(
    {},
    optional={
        "key": st.one_of(st.none(), st.text(max_size=8)),
        "value": st.one_of(st.none(), st.text(max_size=8), st.sampled_from(["aGk=", "", "AA=="])),
        "headers": st.lists(
            st.fixed_dictionaries(
                {"name": st.text(max_size=4)}, optional={"value": st.one_of(st.none(), st.text(max_size=4))}
            ),
            max_size=3,
        ),
        "partition": st.one_of(st.none(), st.integers(0, 5)),
        "timestamp": st.one_of(st.none(), st.integers(0, 2**45)),
    },
)
_valid_body = st.fixed_dictionaries(
    {"records": st.lists(_valid_record, min_size=1, max_size=4)},
    optional={"encoding": st.sampled_from(["utf8", "base64"])},
)
_random_body = st.fixed_dictionaries(
    {},
    optional={
        "records": st.one_of(st.lists(st.one_of(_record, st.none(), st.integers()), max_size=4), st.none()),
        "encoding": st.one_of(st.sampled_from(["utf8", "base64", "hex"]), st.integers()),
        "extra": st.integers(),
    },
)
_body = st.one_of(_valid_body, _random_body)


def _reference(body: dict[str, Any]) -> list[tuple[Any, ...]] | None:
    """What the model path gave: None if the model refuses the body, else the records as tuples (or the
    InvalidPayload a key or value that does not decode raises, as a string)."""
    try:
        model = ProduceIn.model_validate(body)
    except ValidationError:
        return None
    out: list[tuple[Any, ...]] = []
    for rec in model.records:

        def decode(text: str | None) -> bytes | None:
            if text is None:
                return None
            if model.encoding == "utf8":
                return text.encode("utf-8")
            return base64.b64decode(text, validate=True)

        out.append(
            (
                decode(rec.key),
                decode(rec.value),
                tuple((h.name, decode(h.value)) for h in rec.headers),
                rec.partition,
                rec.timestamp,
            )
        )
    return out


@settings(max_examples=examples(400), deadline=None)
@given(_body)
def test_the_compiled_parser_accepts_what_the_model_accepts(body: dict[str, Any]) -> None:
    try:
        expected = _reference(body)
    except (ValueError, UnicodeEncodeError):
        expected = "undecodable"  # type: ignore[assignment]
    raw = json.dumps(body).encode()
    try:
        got = parse_produce_body(raw, "application/json")
    except InvalidPayload:
        assert expected in (None, "undecodable")
        return
    assert expected not in (None, "undecodable")
    assert [
        (r.key, r.value, tuple((h.key, h.value) for h in r.headers), r.partition, r.timestamp) for r in got
    ] == expected


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"", InvalidPayload),
        (b"   ", InvalidPayload),
        (b"{", BadRequest),
        (b"\xff\xfe", BadRequest),
        (b'{"records": [{"value": "\\ud800"}]}', InvalidPayload),  # a lone surrogate: JSON, not Unicode
        (b'{"records": [{"timestamp": NaN}]}', InvalidPayload),
        (b"[" * 100_000, BadRequest),
    ],
)
def test_bodies_the_fast_parser_refuses_get_the_answers_they_always_got(
    raw: bytes, error: type[StrataError]
) -> None:
    with pytest.raises(error):
        parse_produce_body(raw, "application/json")


def test_content_types() -> None:
    for ok in (
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/vnd.x+json",
    ):
        assert is_json(ok)
    for bad in (None, "", "text/plain", "application/xml", "multipart/form-data; boundary=x", "json"):
        assert not is_json(bad)
    with pytest.raises(InvalidPayload):
        parse_produce_body(b'{"records": [{"value": "x"}]}', "text/plain")
