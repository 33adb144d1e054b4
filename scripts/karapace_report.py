"""The pass/fail table of a Karapace suite run (scripts/karapace_suite.sh), from pytest's JUnit XML.

    python scripts/karapace_report.py JUNIT_XML TESTS_TXT

Prints Markdown: a row of counts per test file, then per file one row per test with its outcome and, for a
failure or an error, the first line of its message. Deselected tests (``!<node id>  # reason`` lines of
TESTS_TXT) are listed with their reason. The last line is the totals. A test whose call failed and whose
teardown errored appears twice in the XML; it counts once, as failed.
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


def _cell(text: str) -> str:
    text = text.replace("|", "\\|")
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


def render(cases: list[Case], skipped_out: list[tuple[str, str, str]]) -> list[str]:
    by_file: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        by_file[case.file].append(case)
    out_by_file: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for file, test, reason in skipped_out:
        out_by_file[file].append((test, reason))
    files = list(dict.fromkeys([*by_file, *out_by_file]))
    totals = dict.fromkeys((*OUTCOMES, "deselected"), 0)
    lines = ["| file | passed | failed | errors | skipped | deselected |", "|---|---:|---:|---:|---:|---:|"]
    for file in files:
        counts = [sum(c.outcome == o for c in by_file[file]) for o in OUTCOMES] + [len(out_by_file[file])]
        for key, count in zip(totals, counts, strict=True):
            totals[key] += count
        lines.append(f"| {Path(file).name} | " + " | ".join(map(str, counts)) + " |")
    lines.append("| **total** | " + " | ".join(f"**{n}**" for n in totals.values()) + " |")
    for file in files:
        lines += [
            "",
            f"### {Path(file).name}",
            "",
            "| test | result | first line of the message |",
            "|---|---|---|",
        ]
        for case in by_file[file]:
            result = case.outcome if case.outcome in ("passed", "skipped") else case.outcome.upper()
            lines.append(f"| {_cell(case.name)} | {result} | {_cell(case.message)} |")
        lines += [f"| {_cell(test)} | deselected | {_cell(reason)} |" for test, reason in out_by_file[file]]
    names = {"error": "errored"}
    lines += ["", ", ".join(f"{names.get(key, key)} {count}" for key, count in totals.items())]
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    junit, tests_txt = map(Path, argv)
    print("\n".join(render(read_cases(junit), deselected(tests_txt))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
