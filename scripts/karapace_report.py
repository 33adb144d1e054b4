"""The pass/fail table of a Karapace suite run (scripts/karapace_suite.sh), from pytest's JUnit XML.

    python scripts/karapace_report.py JUNIT_XML TESTS_TXT [KNOWN_TXT]

Prints Markdown: a row of counts per test file, then per file one row per test with its outcome and, for a
failure or an error, its known cause or else the first line of its message. Deselected tests
(``!<node id>  # reason`` lines of TESTS_TXT) are listed with their reason. The last lines are the totals,
and the failures KNOWN_TXT does not explain and the known failures that passed: what changed since the
table in docs/karapace-suite.md.

KNOWN_TXT has one ``<pattern> # <cause>`` line per known failure: the pattern is a node id, or a node id
with one ``*`` standing for any text. A test whose call failed and whose teardown errored appears twice in
the XML; it counts once, as failed.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

OUTCOMES = ("passed", "failed", "error", "skipped")
# The worse outcome wins when a test has two entries (its call and its teardown).
RANK = {"passed": 0, "skipped": 1, "error": 2, "failed": 3}
MESSAGE_CHARS = 160


@dataclass
class Case:
    file: str
    name: str
    outcome: str
    message: str

    @property
    def node(self) -> str:
        return f"{self.file}::{self.name}"


def _outcome(case: ET.Element) -> tuple[str, str]:
    for tag, outcome in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        child = case.find(tag)
        if child is not None:
            text = child.get("message") or child.text or ""
            first = next((line.strip() for line in text.splitlines() if line.strip()), "")
            return outcome, first
    return "passed", ""


def read_cases(junit: Path) -> list[Case]:
    merged: dict[tuple[str, str], Case] = {}
    for element in ET.parse(junit).getroot().iter("testcase"):
        # xunit2's classname is the module's dotted path (tests.integration.test_schema).
        file = element.get("classname", "").replace(".", "/") + ".py"
        name = element.get("name", "")
        outcome, message = _outcome(element)
        known = merged.get((file, name))
        if known is None or RANK[outcome] > RANK[known.outcome]:
            merged[(file, name)] = Case(file, name, outcome, message)
    return list(merged.values())


def deselected(tests_txt: Path) -> list[tuple[str, str, str]]:
    """(file, test, reason) per ``!`` line."""
    found = []
    for line in tests_txt.read_text().splitlines():
        if not line.startswith("!"):
            continue
        node, _, reason = line[1:].partition("#")
        file, _, test = node.strip().partition("::")
        found.append((file, test, reason.strip()))
    return found


class Known:
    """The known failures: ``<pattern> # <cause>`` lines (the module docstring)."""

    def __init__(self, text: str) -> None:
        # (head, tail, whether the pattern has a ``*``, cause)
        self.patterns: list[tuple[str, str, bool, str]] = []
        for line in text.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            pattern, _, cause = line.partition(" # ")
            head, star, tail = pattern.strip().partition("*")
            self.patterns.append((head, tail, bool(star), cause.strip()))

    def cause(self, node: str) -> str | None:
        for head, tail, star, cause in self.patterns:
            if not star and node == head:
                return cause
            if star and node.startswith(head) and node.endswith(tail) and len(node) >= len(head + tail):
                return cause
        return None


def _cell(text: str) -> str:
    text = text.replace("|", "\\|")
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


def _counts(cases: list[Case], out: int) -> list[int]:
    return [sum(c.outcome == o for c in cases) for o in OUTCOMES] + [out]


def render(cases: list[Case], skipped_out: list[tuple[str, str, str]], known: Known) -> list[str]:
    by_file: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        by_file[case.file].append(case)
    out_by_file: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for file, test, reason in skipped_out:
        out_by_file[file].append((test, reason))
    files = list(dict.fromkeys([*by_file, *out_by_file]))
    lines = ["| file | passed | failed | errors | skipped | deselected |", "|---|---:|---:|---:|---:|---:|"]
    for file in files:
        counts = _counts(by_file[file], len(out_by_file[file]))
        lines.append(f"| {Path(file).name} | " + " | ".join(map(str, counts)) + " |")
    totals = _counts(cases, len(skipped_out))
    lines.append("| **total** | " + " | ".join(f"**{n}**" for n in totals) + " |")
    for file in files:
        lines += [
            "",
            f"### {Path(file).name}",
            "",
            "| test | result | cause, or the message |",
            "|---|---|---|",
        ]
        for case in by_file[file]:
            failed = case.outcome in ("failed", "error")
            result = case.outcome.upper() if failed else case.outcome
            why = (known.cause(case.node) or case.message) if failed else ""
            lines.append(f"| {_cell(case.name)} | {result} | {_cell(why)} |")
        lines += [f"| {_cell(test)} | deselected | {_cell(reason)} |" for test, reason in out_by_file[file]]
    names = ("passed", "failed", "errored", "skipped", "deselected")
    lines += ["", ", ".join(f"{name} {count}" for name, count in zip(names, totals, strict=True))]
    new = [c.node for c in cases if c.outcome in ("failed", "error") and known.cause(c.node) is None]
    fixed = [c.node for c in cases if c.outcome == "passed" and known.cause(c.node) is not None]
    lines.append(f"failures not in the known list: {len(new)}; known failures that passed: {len(fixed)}")
    lines += [f"- new failure: {node}" for node in new] + [f"- passes now: {node}" for node in fixed]
    return lines


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    junit, tests_txt = Path(argv[0]), Path(argv[1])
    known = Known(Path(argv[2]).read_text() if len(argv) == 3 else "")
    print("\n".join(render(read_cases(junit), deselected(tests_txt), known)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
