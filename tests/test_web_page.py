"""The web page at /web in headless Chromium: reset an episode, call two tools, see results."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from test_server_app import VaultEnv

from conftest import serve

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")


def open_page(playwright, url: str):
    """A Chromium page on the episode player, connected to its WebSocket session."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{url}/web")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('connected')")
    return browser, page


def call(page, tool: str, rows_before: int, **arguments: str) -> None:
    page.select_option("#tool", tool)
    for name, value in arguments.items():
        page.fill(f"#arg-{name}", value)
    page.click("#call")
    page.wait_for_function(f"document.querySelectorAll('#history tr').length > {rows_before}")


def test_page_resets_calls_two_tools_and_shows_their_results(tmp_path):
    from playwright.sync_api import sync_playwright

    with serve(VaultEnv) as url, sync_playwright() as pw:
        browser, page = open_page(pw, url)
        try:
            assert page.title() == "vault episode player"
            assert page.locator("#task option").all_inner_texts() == ["small", "large"]
            page.select_option("#task", "large")
            page.fill("#seed", "3")
            page.click("#reset")
            page.wait_for_function("document.getElementById('steps-left').textContent === '30'")
            assert '"D8"' in page.inner_text("#observation")
            call(page, "open_drawer", 0, drawer="D2")
            call(page, "open_drawer", 1, drawer="D7")
            rows = page.locator("#history tr").all_inner_texts()
            assert "open_drawer" in rows[0] and '"D2"' in rows[0]
            assert '"drawer":"D7"' in rows[1]
            assert page.inner_text("#steps") == "2"
            assert page.inner_text("#total-reward") == "-0.040"
            assert "D2" in page.inner_text("#memory") and "D7" in page.inner_text("#memory")
            call(page, "open_drawer", 2, drawer="nope")
            assert "no drawer 'nope'" in page.inner_text("#message")
            assert page.inner_text("#grade") == "episode running"
            page.screenshot(path=str(tmp_path / "web.png"), full_page=True)
            if os.environ.get("WEB_SCREENSHOT"):
                page.screenshot(path=os.environ["WEB_SCREENSHOT"], full_page=True)
        finally:
            browser.close()
    assert (tmp_path / "web.png").stat().st_size > 10_000


def test_aml_page_tracks_case_file_and_async_jobs(tmp_path):
    from playwright.sync_api import sync_playwright

    from env.registry import env_class

    try:
        env_class("aml")
    except ImportError:
        pytest.skip("the AML environment does not import yet")
    with serve("aml") as url, sync_playwright() as pw:
        browser, page = open_page(pw, url)
        try:
            page.fill("#seed", "3")
            page.click("#reset")
            # '#steps' already reads 0 before the reset answers: wait for the observation itself.
            page.wait_for_function(
                "document.getElementById('steps').textContent === '0'"
                " && document.getElementById('observation').textContent.trim() !== ''"
            )
            alert = json.loads(page.inner_text("#observation"))
            call(page, "review_alert", 0, alert_id=alert["alert_id"])
            txs = json.loads(page.inner_text("#observation"))["triggered_transactions"]
            call(page, "request_wire_trace", 1, transaction_id=txs[0]["id"])
            assert "JOB-" in page.inner_text("#jobs") and "queued" in page.inner_text("#jobs")
            note = f"{alert['subject_id']} traded with {txs[0]['counterparty']}"
            call(page, "write_to_case_file", 2, note=note)
            assert note in page.inner_text("#casefile")
            assert page.locator("#history tr").count() == 3
            page.screenshot(path=str(tmp_path / "aml.png"), full_page=True)
            if os.environ.get("WEB_SCREENSHOT_AML"):
                page.screenshot(path=os.environ["WEB_SCREENSHOT_AML"], full_page=True)
        finally:
            browser.close()
