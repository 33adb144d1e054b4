"""spark-submit entry point for Spark compaction: ``spark-submit scripts/spark_compact.py [options]``.

The options are those of ``strata compact`` (``--spark`` is implied). It lives outside the packages so that
``pipeline`` never imports the front door: this script is the top of the stack, like the ``strata`` command.
"""

from __future__ import annotations

import sys

from strata.cli import main as cli_main


def main(argv: list[str] | None = None) -> int:
    # An empty --spark-master keeps the master spark-submit was given (a later --spark-master wins).
    return cli_main(["compact", "--spark", "--spark-master", "", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
