"""README.md and the pages of docs/ hold together: every relative link reaches a file and, for a page, a
heading; every file of the repository they name in code spans exists; every page is reachable from the
README; and the principals file shown in docs/operations.md is one Strata loads, with the grants the page
describes.

The benchmark log (docs/benchmarks.md) is linked to as a page only: its sections follow the figures, which
are re-measured, so a link to one of them would rot. Its own links and paths are its business.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from agents.acl import Acls, Request
from agents.principals import parse_principals
from storage.acl_model import Operation, ResourceType
from tests.fixtures.docs import DOCS, README, ROOT, blocks, headings, read, section

# The generated benchmarks page is checked by its own test; the log of past sessions names paths and
# settings as they were then.
PAGES = (
    README,
    *sorted(p for p in DOCS.glob("*.md") if p.name not in ("benchmarks.md", "benchmarks-history.md")),
)
BENCHMARKS = DOCS / "benchmarks.md"

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_FENCED = re.compile(r"^```.*?^```$", re.DOTALL | re.MULTILINE)
# Code spans that start with one of these name a file or directory of the repository.
_TOP = (
    "agents",
    "api",
    "bench",
    "broker",
    "docs",
    "pipeline",
    "planner",
    "scripts",
    "storage",
    "strata",
    "tests",
)


def _prose(path: Path) -> str:
    """The page without its fenced code blocks: links and paths in examples are the examples' business."""
    return _FENCED.sub("", read(path))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading line: lower case, punctuation dropped, spaces as hyphens."""
    title = heading.lstrip("#").strip().lower()
    return re.sub(r"[^\w\- ]", "", title).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in headings(read(path)):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(path: Path) -> list[str]:
    return [t for t in _LINK.findall(_prose(path)) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_a_file_and_a_heading(page: Path) -> None:
    problems = []
    for link in _links(page):
        target, _, anchor = link.partition("#")
        resolved = (page.parent / target).resolve() if target else page
        if not resolved.exists():
            problems.append(f"{link}: no such file")
        elif resolved == BENCHMARKS and anchor:
            problems.append(f"{link}: link to docs/benchmarks.md as a page, not to a section of it")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            problems.append(f"{link}: {resolved.name} has no heading #{anchor}")
    assert not problems, "\n".join(problems)


# docs/librdkafka-suite.md names files of librdkafka's checkout, not of this repository.
OWN_PATHS = tuple(p for p in PAGES if p.name != "librdkafka-suite.md")


@pytest.mark.parametrize("page", OWN_PATHS, ids=lambda p: str(p.relative_to(ROOT)))
def test_paths_in_code_spans_exist(page: Path) -> None:
    named = {
        span.split("::")[0].rstrip(".,:;")
        for span in _CODE_SPAN.findall(_prose(page))
        if span.split("/")[0] in _TOP and "/" in span and not re.search(r"[\s…*<>{}\[\]]", span)
    }
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"{page.relative_to(ROOT)} names files that do not exist: {missing}"


def test_every_page_is_linked_from_the_readme() -> None:
    linked = {(README.parent / link.partition("#")[0]).resolve() for link in _links(README)}
    # The log of past benchmark sessions is linked from docs/benchmarks.md only, as history.
    pages = [p for p in DOCS.glob("*.md") if p.name != "benchmarks-history.md"]
    orphans = sorted(p.name for p in pages if p.resolve() not in linked)
    assert not orphans, f"pages of docs/ that README.md does not link to: {orphans}"


def test_the_documented_principals_file_loads_with_the_grants_described() -> None:
    (toml,) = blocks(section(DOCS / "operations.md", "## Authentication, permissions and TLS"), "toml")
    principals = parse_principals(tomllib.loads(toml), source="docs/operations.md")
    admin, service = principals.get("admin"), principals.get("orders-service")
    assert admin is not None
    assert service is not None
    assert admin.superuser
    assert principals.by_password("admin", "change-me") is admin
    assert principals.by_password("orders-service", "also-change-me") is service
    assert principals.by_token("a-long-random-token") is service
    acls = Acls(principals.file_acls())

    def may(op: Operation, resource: ResourceType, name: str) -> bool:
        return acls.allowed(Request("User:orders-service", "10.0.0.1", op, resource, name))

    assert may(Operation.READ, ResourceType.TOPIC, "orders.eu")
    assert may(Operation.WRITE, ResourceType.TOPIC, "orders.eu")
    assert may(Operation.DESCRIBE, ResourceType.TOPIC, "orders.eu")
    assert not may(Operation.DELETE, ResourceType.TOPIC, "orders.eu")
    assert not may(Operation.READ, ResourceType.TOPIC, "payments")
    assert may(Operation.READ, ResourceType.GROUP, "billing-eu")
    assert not may(Operation.DELETE, ResourceType.GROUP, "billing-eu")
    assert not may(Operation.READ, ResourceType.GROUP, "other")
    assert may(Operation.READ, ResourceType.TABLE, "strata.orders")
    assert may(Operation.DESCRIBE, ResourceType.TABLE, "strata.orders_state")
    assert not may(Operation.READ, ResourceType.TABLE, "strata.payments")
