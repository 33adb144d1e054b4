"""The "consumer" group protocol's member bytes, read by hand: the subscription a member sends with its
JoinGroup and the assignment its leader hands out in SyncGroup.

The group coordinator stores both as opaque bytes; only these views need to look inside, and neither is
worth a Kafka library in the agent core (an HTTP-only agent loads none). Both formats are Kafka's classic
non-flexible encoding (big-endian; a string is an int16 length, -1 for null, then UTF-8):

    ConsumerProtocolSubscription (every version)      ConsumerProtocolAssignment (every version)
      int16  version                                    int16  version
      int32  topic count                                int32  topic count
      string topic  (repeated)                          per topic: string topic,
      ... user data, owned partitions, rack                        int32 count, int32 partition (repeated)
                                                        bytes  user data (int32 length, -1 null)

Bytes that do not parse are the client's: they give no topics and never an error, so a bad member cannot
fail a group request or a describe.
"""

from __future__ import annotations

from agents.group_model import Group


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a subscription; what parsed before the bytes stopped making sense."""
    view = memoryview(metadata)
    if len(view) < 6:
        return []
    count = int.from_bytes(view[2:6], "big", signed=True)
    topics: list[str] = []
    pos = 6
    for _ in range(max(0, count)):
        if pos + 2 > len(view):
            return topics
        size = int.from_bytes(view[pos : pos + 2], "big", signed=True)
        pos += 2
        if size < 0 or pos + size > len(view):
            return topics
        try:
            topics.append(bytes(view[pos : pos + size]).decode("utf-8"))
        except UnicodeDecodeError:
            return topics
        pos += size
    return topics


def assignment_partitions(data: bytes) -> dict[str, list[int]]:
    """An assignment's partitions by topic, each list sorted and without repeats; ``{}`` unless the whole
    topic list parses (null topic names are skipped). The user data after it is not read."""
    view = memoryview(data)
    if len(view) < 6:
        return {}
    count = int.from_bytes(view[2:6], "big", signed=True)
    if count < 0:
        return {}
    found: dict[str, set[int]] = {}
    pos = 6
    for _ in range(count):
        if pos + 2 > len(view):
            return {}
        size = int.from_bytes(view[pos : pos + 2], "big", signed=True)
        pos += 2
        topic: str | None = None
        if size >= 0:
            if pos + size > len(view):
                return {}
            try:
                topic = bytes(view[pos : pos + size]).decode("utf-8")
            except UnicodeDecodeError:
                return {}
            pos += size
        if pos + 4 > len(view):
            return {}
        partitions = int.from_bytes(view[pos : pos + 4], "big", signed=True)
        pos += 4
        end = pos + 4 * max(0, partitions)
        if end > len(view):
            return {}
        if topic is not None:
            found.setdefault(topic, set()).update(
                int.from_bytes(view[i : i + 4], "big", signed=True) for i in range(pos, end, 4)
            )
        pos = end
    return {topic: sorted(parts) for topic, parts in found.items()}


def subscribed_topics(group: Group) -> set[str]:
    """Topics the members of a "consumer" group subscribe to, from their protocol metadata; OffsetDelete
    refuses to delete their offsets (GROUP_SUBSCRIBED_TO_TOPIC)."""
    if group.protocol_type != "consumer":
        return set()
    topics: set[str] = set()
    for member in group.members.values():
        for _, metadata in member.protocols:
            topics.update(subscription_topics(metadata))
    return topics
