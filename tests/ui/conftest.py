"""Headless Chromium for the dashboard's browser tests: Debian's, driven by Playwright's core.

``make browser`` (part of ``make test``) installs Debian's ``chromium`` when it is missing;
nothing downloads a browser. ``SPILLWAY_CHROMIUM`` points at another binary. Without Chromium the
tests fail, unless the install cannot run on this machine (not root, or no apt-get): then they
are skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
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


def missing_browser() -> str | None:
    """Why Chromium cannot be installed here (``make browser`` needs root and apt-get), or None
    when it can: a missing browser is then a failure, not a skip."""
    if os.geteuid() == 0 and shutil.which("apt-get") is not None:
        return None
    return (
        f"no Chromium at {CHROMIUM} and `make browser` cannot install it here (it needs root "
        "and apt-get): sudo apt-get install -y chromium, or set SPILLWAY_CHROMIUM"
    )


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """A Playwright ``Browser`` on Debian's Chromium (see the module docstring when missing)."""
    if not CHROMIUM.is_file():
        reason = missing_browser()
        if reason is not None:
            pytest.skip(reason)
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
