"""Kafka's consumer-group protocol errors (agents/group_state.py), by their Kafka names."""

from __future__ import annotations

from storage.errors.base import ErrorKind, StrataError
from storage.errors.races import Conflict

# --- consumer groups (agents/group_state.py): Kafka's group protocol errors ------------------------------


class InvalidGroupId(StrataError):
    """An empty or malformed group id (INVALID_GROUP_ID)."""

    kind = ErrorKind.INVALID
    code = 40005


class UnknownMemberId(StrataError):
    """The member id is not (or no longer) in the group: it expired, left, or never joined
    (UNKNOWN_MEMBER_ID). The client rejoins without an id."""

    kind = ErrorKind.NOT_FOUND
    code = 40404


class GroupIdNotFound(StrataError):
    """No group has this id (GROUP_ID_NOT_FOUND)."""

    kind = ErrorKind.NOT_FOUND
    code = 40405


class IllegalGeneration(Conflict):
    """The request names a generation the group has moved past (ILLEGAL_GENERATION): rejoin."""

    code = 40906


class RebalanceInProgress(Conflict):
    """The group is rebalancing (REBALANCE_IN_PROGRESS): rejoin, then retry."""

    code = 40907


class FencedInstanceId(Conflict):
    """A newer member with the same group.instance.id replaced this one (FENCED_INSTANCE_ID)."""

    code = 40908
    retriable = False


class PolicyViolation(Conflict):
    """The topic's configuration forbids the operation: deleting records of a topic whose cleanup.policy
    is compact only (Kafka's POLICY_VIOLATION). Not retriable until the configuration changes."""

    code = 40910
    retriable = False


class NonEmptyGroup(Conflict):
    """The group has active members, so it cannot be deleted (NON_EMPTY_GROUP), nor its offsets set over
    HTTP."""

    code = 40909
    retriable = False


class MemberIdRequired(StrataError):
    """A first JoinGroup (v4+, KIP-394): the answer carries the new member id, to join again with."""

    kind = ErrorKind.INVALID
    code = 42213
    retriable = True

    def __init__(self, member_id: str) -> None:
        super().__init__(f"rejoin with the member id {member_id!r}")
        self.member_id = member_id


class InconsistentGroupProtocol(StrataError):
    """The member's protocol type or protocols do not match the group's (INCONSISTENT_GROUP_PROTOCOL)."""

    kind = ErrorKind.INVALID
    code = 42214


class InvalidSessionTimeout(StrataError):
    """The session timeout is outside the broker's bounds (INVALID_SESSION_TIMEOUT)."""

    kind = ErrorKind.INVALID
    code = 42215
