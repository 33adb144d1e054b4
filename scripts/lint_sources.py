"""The source rules no off-the-shelf linter checks, run by scripts/check.

- **Sizes.** A product module has at most ``MAX_MODULE_LINES`` lines and a function at most
  ``MAX_FUNCTION_LINES``, so that each module holds one concept and each function reads on one screen. The
  exceptions are listed in ``LONG_FUNCTIONS`` with their reason.
- **References a clone can resolve.** Code, docs and scripts never point at documents outside the
  repository (a design brief, a style guide, an issue tracker's numbers, a sibling folder): a reader of a
  clone could not follow them. Say the thing itself.
- **No dated figures in code.** A comment gives the reason for a choice and may point at
  docs/benchmarks.md; a date in product code means a measurement that will age there.

Run ``python scripts/lint_sources.py``; it prints one line per finding and exits 1 if there is any.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("agents", "api", "broker", "pipeline", "planner", "registry", "storage", "strata")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
# (module, function): why it may be longer.
LONG_FUNCTIONS = {
    # The reference codec's loops: each walks a record's fields in layout order, every read bounded by its
    # batch, so the byte layout and its checks read top to bottom in one place. They are the authority the
    # compiled codec and the C scans are property-tested against, not a hot path.
    ("storage/records/decode.py", "decode_batch"): "the reference decoder's record loop",
    ("storage/records/encode.py", "encode_batch_reference"): "the reference encoder's record loop",
}
# Text a clone cannot resolve: documents that live outside the repository.
UNRESOLVABLE = re.compile(
    r"STYLE\.md|STYLE item|\bARCHITECTURE\b|\bthe brief\b|research brief"
    r"|\.\./shared|\bshared/(research|bench)|\b[Ii]ssue \d+\b"
)
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
TEXT_SUFFIXES = {".py", ".c", ".h", ".pyi", ".md", ".sh", ".toml", ".yml", ".yaml", ".js", ".mjs", ".html"}
# Pages whose subject is past runs: they name dates and may quote what they replaced.
HISTORY = {"docs/benchmarks-history.md", "scripts/lint_sources.py"}


def tracked_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [f for f in listed.stdout.splitlines() if (ROOT / f).is_file()]


def size_findings(path: str, source: str) -> list[str]:
    findings: list[str] = []
    lines = source.count("\n") + (0 if source.endswith("\n") else 1)
    if lines > MAX_MODULE_LINES:
        findings.append(f"{path}: {lines} lines (at most {MAX_MODULE_LINES}); split it by concept")
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES and (path, node.name) not in LONG_FUNCTIONS:
                findings.append(
                    f"{path}:{node.lineno}: {node.name} is {length} lines (at most {MAX_FUNCTION_LINES})"
                )
    return findings


def text_findings(path: str, text: str, product: bool) -> list[str]:
    findings: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        found = UNRESOLVABLE.search(line)
        if found:
            findings.append(f"{path}:{number}: {found.group(0)!r} names something outside the repository")
        if product and DATE.search(line):
            findings.append(
                f"{path}:{number}: a date in product code (a figure that will age): {line.strip()}"
            )
    return findings


def main() -> int:
    findings: list[str] = []
    for path in tracked_files():
        if Path(path).suffix not in TEXT_SUFFIXES or path in HISTORY:
            continue
        text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        product = path.split("/", 1)[0] in PRODUCT
        if product and path.endswith(".py"):
            findings += size_findings(path, text)
        findings += text_findings(path, text, product)
    for finding in findings:
        print(finding)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
