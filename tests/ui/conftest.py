"""Headless Chromium for the dashboard's browser tests: Debian's, driven by Playwright's core.

``make browser`` (part of ``make test``) installs Debian's ``chromium`` when it is missing;
nothing downloads a browser. ``SPILLWAY_CHROMIUM`` points at another binary.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("SPILLWAY_CHROMIUM", "/usr/bin/chromium"))

#: Flags for a headless Chromium on a machine without a network or a display, as root.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """A Playwright ``Browser`` on Debian's Chromium (fails, saying how, when it is missing)."""
    if not CHROMIUM.is_file():
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: run `make browser`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A fresh page (its own context) of 1280 x 900 pixels."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()
