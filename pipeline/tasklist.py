"""The task list the JVM decoder reads: a snapshot's files and chunks as text. Pure, no Spark.

``read_topic`` hands it to the Java source (``pipeline/jvm``, ``strata.spark.TaskList`` parses it) as the
option ``tasks``. UTF-8 text, one line per item ending in ``\\n``, fields separated by one tab::

    strata-tasks 2
    F   <object key>   <object URL>
    C   <topic>   <partition>   <base_offset>   <position>   <length>   <crc>   <start>   <end>
    X   <producer_id>   <first>   <last>
    X   ...
    C   ...
    F   ...

The first line names the format and its version. An ``F`` line starts a file: its key in the bucket (what
errors name) and the URL Hadoop opens, verbatim (``s3a://bucket/prefix/key``, ``file:///dir/key``: not
percent-encoded, not glob-escaped). The ``C`` lines after it are that file's chunks (``ChunkTask``) by
increasing position: decode bytes [position, position + length), check them against ``crc`` (CRC-32C,
unsigned), add ``base_offset`` to the batches' relative offsets, keep offsets in [start, end). The ``X``
lines after a ``C`` line, none or more, are that chunk's aborted transactions (``ChunkTask.aborted``,
read_committed): drop every transactional batch (attributes bit 4) whose producer id is ``producer_id``
and whose absolute base offset lies in [first, last] (last: the ABORT marker's offset). Integers are
decimal. No field may hold a tab or a line break: topic names cannot, and a bucket directory that does is
refused here (``SettingsError``).

Version 2 added the ``X`` lines; a decoder of another version refuses the list at its first line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from pipeline.snapshot import ChunkTask
from storage.errors import SettingsError

HEADER = "strata-tasks 2"
_SEPARATORS = re.compile(r"[\t\r\n]")


def encode_tasks(tasks: Mapping[str, Sequence[ChunkTask]], url_of: Callable[[str], str]) -> str:
    """The task list of ``tasks`` (object key -> its chunks by position); ``url_of`` maps a key to its URL."""
    lines = [HEADER]
    for key in sorted(tasks):
        url = url_of(key)
        for field in (key, url):
            if _SEPARATORS.search(field):
                raise SettingsError(
                    f"cannot hand {field!r} to the JVM decoder: it holds a tab or a line break"
                )
        lines.append(f"F\t{key}\t{url}")
        for t in tasks[key]:
            lines.append(
                f"C\t{t.topic}\t{t.partition}\t{t.base_offset}\t{t.position}\t{t.length}\t{t.crc}\t{t.start}\t{t.end}"
            )
            lines.extend(f"X\t{a.producer_id}\t{a.first_offset}\t{a.last_offset}" for a in t.aborted)
    lines.append("")
    return "\n".join(lines)
