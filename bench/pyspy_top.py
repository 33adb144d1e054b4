"""Summarise a py-spy profile in collapsed-stack form (``py-spy record --format raw``).

    python -m bench.pyspy_top bench/results/<run>-local-produce.folded [--top 25] [--match TEXT]

Prints the share of samples per function: self (the function was the leaf, i.e. running its own code) and
inclusive (the function was anywhere on the stack), highest first. ``--match`` keeps only stacks that contain
TEXT (e.g. ``produce (api/app.py``) so one request path can be broken down; ``--by-function`` merges the
lines of each function. Record with ``--gil`` to see where the GIL (the agent's one core) goes.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path


def folded(path: Path) -> Iterator[tuple[list[str], int]]:
    """(frames, root first, and the sample count) of every stack in a collapsed-stack file."""
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            yield stack.split(";"), int(count)


def function_of(frame: str) -> str:
    """``f (file.py:12)`` -> ``f (file.py)``: a function's lines merged."""
    return re.sub(r":\d+\)$", ")", frame)


def shares(counts: Counter[str], total: int, top: int) -> list[tuple[str, float]]:
    """The ``top`` most sampled keys, each with its percentage of ``total`` samples."""
    return [(f, round(100 * n / total, 1)) for f, n in counts.most_common(top)] if total else []


def load(path: Path, match: str | None, by_function: bool) -> list[tuple[list[str], int]]:
    stacks = []
    for frames, count in folded(path):
        if match and match not in ";".join(frames):
            continue
        stacks.append(([function_of(f) for f in frames] if by_function else frames, count))
    return stacks


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--match", default=None)
    parser.add_argument("--by-function", action="store_true", help="merge a function's lines")
    args = parser.parse_args()
    for path in args.files:
        stacks = load(path, args.match, args.by_function)
        total = sum(n for _, n in stacks)
        own: Counter[str] = Counter()
        incl: Counter[str] = Counter()
        for frames, n in stacks:
            own[frames[-1]] += n
            for frame in set(frames):
                incl[frame] += n
        print(f"== {path.name}: {total} samples" + (f" matching {args.match!r}" if args.match else ""))
        if not total:
            continue
        print("-- self")
        for frame, n in own.most_common(args.top):
            print(f"{100 * n / total:6.1f}%  {frame}")
        print("-- inclusive")
        for frame, n in incl.most_common(args.top):
            print(f"{100 * n / total:6.1f}%  {frame}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
