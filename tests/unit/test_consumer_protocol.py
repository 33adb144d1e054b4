"""The "consumer" protocol's member bytes (agents/consumer_protocol.py), against kafka-python's encoder."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from agents.consumer_protocol import assignment_partitions, subscription_topics


def test_subscription_topics_reads_every_version_and_never_raises() -> None:
    def subscription(version: int, topics: list[str], tail: bytes = b"") -> bytes:
        out = version.to_bytes(2, "big") + len(topics).to_bytes(4, "big")
        for t in topics:
            out += len(t.encode()).to_bytes(2, "big") + t.encode()
        return out + tail

    meta = subscription(1, ["orders", "pay\u00e9"], tail=b"\x00\x00\x00\x00\x00\x00\x00\x00")
    assert subscription_topics(meta) == ["orders", "pay\u00e9"]
    assert subscription_topics(subscription(3, [])) == []
    for cut in range(len(meta)):  # every truncation: a prefix of the topics, no exception
        assert subscription_topics(meta[:cut]) in ([], ["orders"], ["orders", "pay\u00e9"])
    assert subscription_topics(b"\x00\x00\xff\xff\xff\xff") == []  # negative count
    assert subscription_topics(b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe") == []  # not UTF-8


def _assignment(version: int, topics: list[tuple[str, list[int]]], user_data: bytes | None) -> bytes:
    return bytes(
        ConsumerProtocolAssignment(version=version, assigned_partitions=topics, user_data=user_data).encode()
    )


@given(
    version=st.integers(0, 3),
    topics=st.lists(
        st.tuples(st.text(max_size=8), st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4)), max_size=4
    ),
    user_data=st.none() | st.binary(max_size=8),
)
def test_assignments_read_as_kafka_python_wrote_them(
    version: int, topics: list[tuple[str, list[int]]], user_data: bytes | None
) -> None:
    data = _assignment(version, topics, user_data)
    expected: dict[str, set[int]] = {}
    for topic, partitions in topics:
        expected.setdefault(topic, set()).update(partitions)
    assert assignment_partitions(data) == {t: sorted(ps) for t, ps in expected.items()}


def test_a_truncated_or_garbled_assignment_gives_nothing_and_never_raises() -> None:
    data = _assignment(1, [("orders", [0, 2]), ("pay\u00e9", [1])], b"ud")
    # Up to the user data every cut breaks the topic list: all or nothing.
    head = len(data) - 6
    for cut in range(head):
        assert assignment_partitions(data[:cut]) == {}
    assert assignment_partitions(data[:head]) == {"orders": [0, 2], "pay\u00e9": [1]}
    assert assignment_partitions(b"\x00\x00\xff\xff\xff\xff") == {}  # negative count
    assert assignment_partitions(b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe\x00\x00\x00\x00") == {}
