"""What the browser scenarios share: a page in a fresh browser context that records the page's uncaught
errors and the agent's 5xx answers (``page.errors``), which a scenario asserts stay empty."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Browser, Page


def open_page(browser: Browser, url: str, **context: Any) -> Page:
    page = browser.new_context(viewport={"width": 1400, "height": 900}, **context).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 500 else None)
    page.errors = errors  # type: ignore[attr-defined]
    page.goto(url)
    return page
