"""How many examples a property test draws.

Each property test names its full count; ``STRATA_TEST_EXAMPLE_SCALE`` (a positive number, 1 by default)
multiplies it, never below ``FLOOR``. ``make test`` runs the full counts; ``make test-fast`` (scripts/check
--fast) a quarter of them, so that the quick loop stays quick while the gate keeps every example: the
development and CI profiles Hypothesis's documentation recommends. The scale is read here rather than through
a Hypothesis profile because a test's own ``settings(max_examples=...)`` overrides any profile.
"""

from __future__ import annotations

import os

FLOOR = 20


def examples(full: int) -> int:
    """The example count for a test whose full count is ``full``."""
    raw = os.environ.get("STRATA_TEST_EXAMPLE_SCALE", "1")
    try:
        scale = float(raw)
    except ValueError:
        scale = 0.0
    if not scale > 0:  # not a number, zero, negative or NaN
        raise ValueError(f"STRATA_TEST_EXAMPLE_SCALE must be a positive number, not {raw!r}")
    return max(min(FLOOR, full), round(full * scale))
