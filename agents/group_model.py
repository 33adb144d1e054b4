"""A consumer group's state: its phase, members and last completed rebalance, as plain values.

``agents/group_state.py`` holds the protocol's rules as pure functions over these; ``agents/group_doc.py``
their stored JSON form. The invariants are those of ``group_state``'s docstring: ``generation`` only grows,
member ids and instance ids are unique, and ``leader`` is a member in CompletingRebalance and Stable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class GroupPhase(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class GroupLimits:
    """The broker's group settings (Kafka's names)."""

    initial_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # in the member's order of preference
    assignment: bytes = b""
    last_seen_ms: int = 0
    # True from the member's JoinGroup in a rebalance until that rebalance completes.
    joining: bool = False

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""


@dataclass(frozen=True, slots=True)
class Round:
    """A completed rebalance, as its JoinGroup answers need it."""

    generation: int
    protocol_type: str | None
    protocol: str
    leader: str
    members: list[tuple[str, str | None, bytes]]  # (member id, instance id, metadata for ``protocol``)


@dataclass(slots=True)
class Group:
    group_id: str
    phase: GroupPhase = GroupPhase.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED, not joined yet: id -> expiry time.
    pending: dict[str, int] = field(default_factory=dict)
    # PreparingRebalance ends at this time even if members are missing; and not before delay_until (the
    # initial rebalance delay), even if every member has joined.
    rebalance_deadline_ms: int = 0
    delay_until_ms: int = 0
    # The last completed rebalance's JoinGroup answers (see the module doc).
    last_round: Round | None = None
