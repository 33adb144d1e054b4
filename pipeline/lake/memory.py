"""The lake writer's memory: pyarrow's allocations on the system allocator.

The writer's memory is bounded by ``lake_write_buffer_bytes``: it holds one piece of a commit at a time
(``source.py``), a few copies of it while pyiceberg writes it (the sort, the split by partition, the
combine of chunks), and lets it all go before the next piece. That bound shows in the process's RSS only if
the allocator gives freed memory back. pyarrow's default allocator (mimalloc, or jemalloc) keeps freed pages
for reuse, per thread, and pyiceberg writes each data file on a thread of its executor: the writer's RSS
then grows over a commit's pieces past what it holds, and stays there. glibc's malloc hands out blocks as
large as Arrow's buffers (many KiB to MiB) from ``mmap`` and unmaps them when they are freed, so the RSS
rises and falls with the piece: ``bench/lake_raw.py`` measures the peak against the bound. The cost is a
system call per large buffer, small beside the decode and the Parquet encoding of a piece. Smaller blocks
come from malloc's arenas (one per thread that allocated), which keep what is freed until trimmed; the
writer trims them after each piece (``release``: Arrow's ``release_unused``, ``malloc_trim`` on glibc),
so that they do not accumulate over a commit's pieces either.

Process-wide: pyarrow has one default pool, which pyiceberg's calls use. A process that runs the lake
writer uses pyarrow for the lake (its maintenance and typed columns included) and for nothing else (the
agent's paths do not import it), so the lake may choose it.
"""

from __future__ import annotations


def use_system_allocator() -> None:
    """pyarrow's default pool from now on: the system allocator (idempotent)."""
    import pyarrow as pa

    system = pa.system_memory_pool()
    if pa.default_memory_pool().backend_name != system.backend_name:
        pa.set_memory_pool(system)


def release() -> None:
    """Give memory freed since the last call back to the system (after each piece of a commit)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
