"""The dashboard in real headless Chromium (Debian's /usr/bin/chromium via Playwright).

Loads every page, runs a context query through the form, seals a topic with
the button and sees the new segment, confirms an extracted item; screenshots
go to ``tests/artifacts/web/`` (gitignored) at laptop and phone widths.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from webserver import Server, load_sample

from stratamem import Config

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).parent / "artifacts" / "web"
# With STRATAMEM_WEB_DOCS_IMG=docs/img the run also refreshes the screenshots docs/web.md shows.
DOC_SHOTS = {"overview", "context", "timeline-before-seal", "items", "phone-context"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for this module.

    Module scope, not session: Playwright's sync API keeps an event loop marked
    running on the main thread while it is active, so a later test's
    ``asyncio.run`` would fail if the browser outlived this module.
    """
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("web_pages") / "memory.db")
    load_sample(srv.memory)
    yield srv
    srv.stop()


@pytest.fixture
def page(browser: Browser, server: Server) -> Iterator[Page]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False, base_url=server.url)
    p = ctx.new_page()
    yield p
    ctx.close()


def shot(page: Page, name: str, *, full: bool = True) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full)
    docs = os.environ.get("STRATAMEM_WEB_DOCS_IMG")
    if docs and name in DOC_SHOTS:
        shutil.copyfile(path, Path(docs) / f"web-{name}.png")
    return path


def api(server: Server, method: str, path: str, **kw: Any) -> Any:
    with server.client() as c:
        r = c.request(method, f"/api/v1/namespaces/default{path}", **kw)
        r.raise_for_status()
        return r.json()


def test_overview_shows_counts_tiers_and_storage(page: Page) -> None:
    page.goto("/")
    card = page.locator("#ns-default")
    expect(card.locator(".stats")).to_contain_text("276")
    expect(card.locator(".tierrow")).to_have_count(4)
    expect(page.locator("main")).to_contain_text("Store on disk")
    shot(page, "overview")


def test_context_inspector_runs_a_query_and_explains_it(page: Page, server: Server) -> None:
    query = "What did we decide about the database and the retry policy?"
    recorded = len(api(server, "GET", "/manifests", params={"limit": 1000})["manifests"])
    page.goto("/ns/default/context")
    page.fill("input[name=q]", query)
    page.fill("input[name=budget]", "1500")
    page.select_option("select[name=policy]", "hybrid")
    page.click("button:has-text('Assemble')")
    expect(page).to_have_url(re.compile(r"/ns/default/context\?q=What"))
    expect(page.locator("#manifest h2")).to_contain_text("of 1,500 tokens")
    # The inspector is a GET: it records nothing. The same request through the API records its manifest.
    assert len(api(server, "GET", "/manifests", params={"limit": 1000})["manifests"]) == recorded
    api(server, "POST", "/context", json={"query": query, "budget": 1500, "policy": "hybrid", "format": "text"})
    sections = page.locator("section.section").evaluate_all("els => els.map(e => e.dataset.section)")
    assert "window" in sections and "recalled" in sections
    widths = page.locator(".budget .seg").evaluate_all("els => els.map(e => e.getBoundingClientRect().width)")
    assert len(widths) >= 2 and all(w > 0 for w in widths)
    expect(page.locator("#near-misses table tbody tr").first).to_be_visible()
    latest = api(server, "GET", "/manifests", params={"limit": 1})["manifests"][0]
    assert latest["budget_tokens"] == 1500
    parts = dict(
        page.locator(".legend li").evaluate_all("els => els.map(e => [e.dataset.part, Number(e.dataset.tokens)])")
    )
    assert sum(v for k, v in parts.items() if k != "unused") == latest["total_tokens"]
    assert parts["unused"] == 1500 - latest["total_tokens"]
    section_tokens = page.locator("section.section h3 .muted").evaluate_all(
        "els => els.map(e => Number(e.textContent.split(' tokens')[0].replace(/,/g, '')))"
    )
    assert sum(section_tokens) + parts.get("framing", 0) == latest["total_tokens"]
    shot(page, "context", full=False)
    page.reload()
    page.click(f"#past a[href='/ns/default/manifests/{latest['id']}']")
    expect(page.locator("h1")).to_contain_text(f"Manifest #{latest['id']}")


def test_seal_button_makes_a_new_segment(page: Page, server: Server) -> None:
    api(server, "POST", "/sessions/kickoff/seal")  # start from a clean topic boundary
    api(
        server,
        "POST",
        "/turns",
        json={
            "session": "kickoff",
            "messages": [
                {"role": "user", "content": "New topic: should the dashboard show token bars per section?"},
                {"role": "assistant", "content": "Yes; one stacked bar per prompt, coloured by section."},
            ],
        },
    )
    page.goto("/ns/default/timeline?session=kickoff")
    before = page.locator("a.node.seg").count()
    expect(page.locator(".node.open")).to_contain_text("open · 2")
    shot(page, "timeline-before-seal", full=False)
    page.click("#seal")
    expect(page.locator("a.node.seg")).to_have_count(before + 1)
    expect(page.locator(".node.open")).to_have_count(0)
    expect(page.locator("#seal")).to_be_disabled()
    newest = api(server, "GET", "/nodes", params={"session": "kickoff", "level": 1})["nodes"][-1]
    assert newest["reason"] == "manual" and newest["turn_count"] == 2
    expect(page.locator(f"#segment-{newest['id']}")).to_contain_text("sealed by manual")
    shot(page, "timeline")
    page.click(f"#segment-{newest['id']} h3 a")
    expect(page.locator("#covered ol.turns li")).to_have_count(2)
    expect(page.locator("#covered")).to_contain_text("token bars per section")
    shot(page, "node", full=False)


def test_confirm_an_extracted_item(page: Page, server: Server) -> None:
    page.goto("/ns/default/items?review=pending")
    waiting = api(server, "GET", "/status")["items_pending_review"]
    expect(page.locator("a.chip[href$='review=pending']")).to_have_text(f"{waiting} items waiting for review (cap 500)")
    row = page.locator("table.items tbody tr").first
    item_id = int((row.get_attribute("id") or "").split("-")[1])
    row.locator("button:has-text('Confirm')").click()
    expect(page).to_have_url(re.compile(r"/ns/default/items\?review=pending$"))
    expect(page.locator(f"#item-{item_id}")).to_have_count(0)
    assert api(server, "GET", f"/items/{item_id}")["review"] == "confirmed"
    shot(page, "items", full=False)
    page.goto(f"/ns/default/items/{item_id}")
    expect(page.locator(".review")).to_contain_text("confirmed")


def test_item_page_shows_the_supersession_chain_and_prompts_that_used_it(page: Page, server: Server) -> None:
    old = api(server, "POST", "/items", json={"content": "Deploy window is Friday", "key": "deploy.window"})
    new = api(server, "POST", "/items", json={"content": "Deploy window moved to Thursday", "key": "deploy.window"})
    api(server, "POST", "/context", json={"query": "when is the deploy window?", "budget": 1200})
    page.goto(f"/ns/default/items/{new['id']}")
    expect(page.locator("#chain li")).to_have_count(2)
    expect(page.locator("#chain li").first).to_contain_text(f"#{old['id']}")
    expect(page.locator("#used li").first).to_contain_text("hot_item")
    shot(page, "item")


def test_pages_fit_a_phone_screen(browser: Browser, server: Server) -> None:
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, base_url=server.url, is_mobile=True)
    p = ctx.new_page()
    try:
        for path, name in (
            ("/", "phone-overview"),
            ("/ns/default/context?q=retry+policy&budget=800", "phone-context"),
            ("/ns/default/timeline", "phone-timeline"),
            ("/ns/default/items", "phone-items"),
        ):
            p.goto(path)
            overflow = p.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{path} scrolls sideways by {overflow}px"
            shot(p, name, full=False)
    finally:
        ctx.close()


def test_unknown_pages_render_an_html_error(page: Page) -> None:
    resp = page.goto("/ns/nowhere/timeline")
    assert resp is not None and resp.status == 404
    expect(page.locator("h1")).to_contain_text("404")


def test_every_page_loads_nothing_from_other_hosts(page: Page, server: Server) -> None:
    seen: list[str] = []
    page.on("request", lambda req: seen.append(req.url))
    node = api(server, "GET", "/nodes", params={"limit": 1})["nodes"][0]["id"]
    for path in (
        "/",
        "/ns/default/context?q=budget",
        "/ns/default/timeline",
        f"/ns/default/nodes/{node}",
        "/ns/default/items",
        "/api/docs",
    ):
        resp = page.goto(path)
        assert resp is not None and resp.status == 200, path
    assert seen and all(u.startswith(server.url + "/") for u in seen), [u for u in seen if server.url not in u]
    assert any(u.endswith("/static/style.css") for u in seen)


def test_the_api_reference_page_lists_every_operation(page: Page, server: Server) -> None:
    with server.client() as c:
        schema = c.get("/api/openapi.json").json()
    n_ops = sum(len(methods) for methods in schema["paths"].values())
    page.goto("/api/docs")
    expect(page.locator("section.op")).to_have_count(n_ops)
    for method in ("POST", "GET"):  # the context route takes its fields as a body or as query parameters
        expect(
            page.locator("section.op", has_text=f"{method} /api/v1/namespaces/{{namespace}}/context")
        ).to_contain_text("budget")


def test_the_overview_reports_summarizer_failures(browser: Browser, tmp_path: Path) -> None:
    from stratamem.llm import OpenAIChat
    from stratamem.summarize.llm import LLMSummarizer
    from stratamem.testing.llm_server import FakeLLMServer
    from stratamem.tokens import get_tokenizer

    config = Config().replace(pyramid={"summarizer": "llm", "micro_chunk_size": 2, "defer_summarization": False})
    with FakeLLMServer(reply="unused") as llm:
        llm.fail_next(5, status=500)
        model = OpenAIChat("m", base_url=llm.openai_base_url, max_retries=0)
        srv = Server(tmp_path / "m.db", config=config, summarizer=LLMSummarizer(model, get_tokenizer(config.tokenizer)))
        try:
            srv.memory.add(
                [
                    {"role": "user", "content": "the summarizer will fail on this topic"},
                    {"role": "assistant", "content": "and the segment keeps an extractive summary"},
                ]
            )
            [node] = api(srv, "GET", "/nodes")["nodes"]
            assert node["summary_status"] == "failed"
            ctx = browser.new_context(base_url=srv.url)
            p = ctx.new_page()
            p.goto("/")
            failures = p.locator("#ns-default ul.small li.bad")
            expect(failures.first).to_contain_text(f"summary of node {node['id']} failed: ModelError")
            expect(p.locator("#ns-default")).to_contain_text("summarizer.failed")
            shot(p, "overview-failures", full=False)
            ctx.close()
        finally:
            srv.stop()
