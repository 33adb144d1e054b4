"""A real browser for the console's scenarios: Debian's Chromium (the Makefile's ``chromium`` target),
headless, driven by Playwright's sync API. Playwright never downloads a browser here: the executable path
is Debian's. A machine without it fails these tests loudly; they never skip.

Screenshots go to ``$STRATA_SCREENSHOTS`` (default ``.cache/screenshots``); those in docs/screenshots, which
docs/console.md shows, are copied from there.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = Path(os.environ.get("STRATA_SCREENSHOTS", Path(__file__).parents[2] / ".cache" / "screenshots"))


# Module scope, not session: Playwright's sync API keeps an event loop running in this thread while it is
# open, so it must be closed before other modules' asyncio tests run.
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Debian's chromium is not installed ({CHROMIUM}): run `make chromium`")
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def screenshot_dir() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
