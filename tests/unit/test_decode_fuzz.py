"""Garbage given to the request decoder (broker/codec.py), sans-IO: whatever the bytes, decoding gives a
typed request or ``BadRequest`` (the connection is closed), never another exception.

tests/kafka/test_fuzz.py sends the same frames to a live agent.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker import apis, codec
from storage.errors import BadRequest
from tests.examples import examples
from tests.fixtures.frames import corpus, sample_frames

SAMPLES = sample_frames()


def _decodes_or_refuses(frame: bytes) -> None:
    try:
        codec.decode(frame)
    except BadRequest:
        pass


def test_samples_decode() -> None:
    for frame in SAMPLES:
        assert isinstance(codec.decode(frame), codec.Decoded)


def test_the_corpus_is_there() -> None:
    # An empty glob would make the parametrized test below vanish instead of fail.
    assert len(corpus()) >= 7


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_refuse(frame: bytes) -> None:
    _decodes_or_refuses(frame)


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(apis.TABLE)),
    st.data(),
    st.binary(max_size=300),
)
def test_valid_headers_with_random_bodies(key: int, data: st.DataObject, body: bytes) -> None:
    api = apis.TABLE[key]
    version = data.draw(st.integers(api.min_version, api.max_version))
    _decodes_or_refuses(struct.pack(">hhi", key, version, 7) + body)


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SAMPLES), st.data())
def test_mutated_requests_decode_or_refuse(frame: bytes, data: st.DataObject) -> None:
    mutated = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 8))):
        kind = data.draw(st.sampled_from(["flip", "cut", "grow", "int"]))
        if kind == "flip" and mutated:
            mutated[data.draw(st.integers(0, len(mutated) - 1))] ^= data.draw(st.integers(1, 255))
        elif kind == "cut" and mutated:
            del mutated[data.draw(st.integers(0, len(mutated) - 1)) :]
        elif kind == "grow":
            mutated += data.draw(st.binary(min_size=1, max_size=16))
        elif kind == "int" and len(mutated) >= 4:
            at = data.draw(st.integers(0, len(mutated) - 4))
            struct.pack_into(">i", mutated, at, data.draw(st.sampled_from([-1, -2, 2**31 - 1, 2**20, 0])))
    _decodes_or_refuses(bytes(mutated))


@pytest.mark.parametrize(("name", "frame"), corpus())
def test_corpus_decodes_or_refuses(name: str, frame: bytes) -> None:
    _decodes_or_refuses(frame)
