"""The operator console in a real browser (Debian's chromium driven by Playwright, no
browser download): one-time link, sign-in, live approvals, approve, deny, a sign
approval's decoded payload and hash, allowances, and refused cross-site posts.

Usage: console_browser.py BASE TOKEN LINK [SCREENSHOT]
Env: CHROMIUM (default /usr/bin/chromium).
"""

import base64
import hashlib
import http.server
import os
import sys
import threading
import time

from playwright.sync_api import expect, sync_playwright

from console_common import Bot

BASE, TOKEN, LINK = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3]
SCREENSHOT = sys.argv[4] if len(sys.argv) > 4 else None
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# The calls are a bot's, with a token of its own (BOT_TOKEN, made by the Rust test with
# `skillbox tokens create`); what only the operator may do goes with the operator's token.
BOT_NAME = os.environ.get("BOT_NAME", "operator")
bot = Bot(BASE, os.environ.get("BOT_TOKEN", TOKEN))
operator = Bot(BASE, TOKEN)


def step(name):
    print(f"-- {name}", flush=True)


def card(page, approval_id):
    return page.locator(f'[data-approval="{approval_id}"]')


def check_headers(response):
    h = response.headers
    csp = h["content-security-policy"]
    assert "'unsafe-inline'" not in csp, csp
    assert "script-src 'self'" in csp, csp
    assert "frame-ancestors 'none'" in csp, csp
    assert h["x-frame-options"] == "DENY", h


def evil_server(host, html):
    """A page on another origin that posts to the console."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://{host}:{server.server_address[1]}/"


def attack_page(approval_id, csrf):
    return f"""<!doctype html><html><body>
<form method="post" action="{BASE}/console/approvals/{approval_id}">
<input type="hidden" name="csrf" value="{csrf}">
<input type="hidden" name="decision" value="approve">
<button type="submit">Win a prize</button></form></body></html>"""


with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])

    step("one-time link signs in once")
    ctx = browser.new_context()
    page = ctx.new_page()
    r = page.goto(LINK)
    assert r.status == 200, r.status
    assert page.url == BASE + "/console/approvals", page.url
    expect(page.get_by_role("heading", name="Approvals")).to_be_visible()
    check_headers(r)
    other = browser.new_context()
    r = other.new_page().goto(LINK)
    assert r.status == 403, f"a used link must not sign in again: {r.status}"
    assert "does not work" in r.text(), r.text()
    assert not any(c["name"] == "skillbox_console" for c in other.cookies()), other.cookies()
    other.close()
    ctx.close()

    step("sign-in form: a wrong token is refused, the right one buys an HttpOnly Strict cookie")
    ctx = browser.new_context()
    page = ctx.new_page()
    # A CSP violation (an inline script or style the policy blocks) or a script error shows
    # here; the console must produce none.
    problems = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    r = page.goto(BASE + "/console/")
    check_headers(r)
    page.get_by_label("API token").fill("not-the-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Wrong API token")
    assert not ctx.cookies(), ctx.cookies()
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(BASE + "/console/approvals")
    assert TOKEN not in page.url
    (cookie,) = [c for c in ctx.cookies() if c["name"] == "skillbox_console"]
    assert cookie["httpOnly"] is True, cookie
    assert cookie["sameSite"] == "Strict", cookie
    assert cookie["path"] == "/console", cookie
    assert cookie["expires"] > time.time(), cookie
    csrf = page.locator('input[name="csrf"]').first.get_attribute("value")
    assert csrf

    step("a pending write approval appears without a reload while the bot's call waits")
    page.evaluate("window.__not_reloaded = true")
    call = bot.call_in_background("signer:write_note", {"text": "hello from the bot"})
    pending = bot.wait_pending("signer", "write_note")
    # Counted from the moment the approval exists: the page must show it within 3 s.
    seen = time.monotonic()
    c = card(page, pending["id"])
    expect(c).to_be_visible(timeout=3000)
    print(f"   the approval showed {time.monotonic() - seen:.2f} s after it existed", flush=True)
    assert page.evaluate("window.__not_reloaded === true"), "the page reloaded"
    expect(c.locator("[data-skill]")).to_have_text("signer")
    expect(c.locator("[data-tool]")).to_have_text("write_note")
    expect(c.locator("[data-trust]")).to_have_text("local")
    expect(c.locator("[data-args]")).to_contain_text('"text": "hello from the bot"')
    assert not call.done(), "the call ran before its approval"
    c.get_by_role("button", name="Approve", exact=True).click()
    page.wait_for_url("**/console/approvals?done=approved")
    result = call.result()
    assert result["success"] is True, result
    assert result["data"] == {"written": "hello from the bot"}, result
    assert result["approval_id"] == pending["id"], result

    step("deny another, with a reason the bot sees")
    call = bot.call_in_background("signer:write_note", {"text": "second"})
    pending = bot.wait_pending("signer", "write_note")
    c = card(page, pending["id"])
    expect(c).to_be_visible(timeout=3000)
    c.get_by_label("Reason").fill("not today")
    c.get_by_role("button", name="Deny").click()
    page.wait_for_url("**/console/approvals?done=denied")
    result = call.result()
    assert result["success"] is False, result
    assert result["error_kind"] == "approval_denied", result
    assert "not today" in result["error"], result

    step("a sign approval shows the payload decoded, with its SHA-256")
    message = b"pay 1 coin to bob"
    call = bot.call_in_background("signer:sign", {"data": base64.b64encode(message).decode()})
    pending = bot.wait_pending("signer", "sign")
    note = bot.call_in_background("signer:write_note", {"text": "buy milk"})
    bot.wait_pending("signer", "write_note")
    expect(card(page, pending["id"])).to_be_visible(timeout=3000)
    page.wait_for_timeout(1600)  # both cards in, then the screenshot for docs/
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT, full_page=True)
    detail = ctx.new_page()
    r = detail.goto(f"{BASE}/console/approvals/{pending['id']}")
    assert r.status == 200
    check_headers(r)
    expect(detail.locator("[data-payload-text]")).to_have_text(message.decode())
    expect(detail.locator("[data-payload-sha256]")).to_have_text(hashlib.sha256(message).hexdigest())
    # Which bot asked, in which context; a bot's own token cannot decide its signature.
    expect(detail.locator("[data-requested-by]")).to_have_text(BOT_NAME)
    expect(detail.locator("[data-context]")).to_have_text("none")
    if BOT_NAME != "operator":
        status, _, text = bot.request("POST", f"/v1/approvals/{pending['id']}", {"decision": "approve"})
        assert status == 403 and "operator role" in text, (status, text)
    detail.get_by_role("button", name="Approve", exact=True).click()
    detail.wait_for_url("**/console/approvals?done=approved")
    result = call.result()
    assert result["success"] is True and result["data"]["ok"] is True, result
    detail.close()

    step("a JSON payload is shown as the exact bytes that are signed, not re-encoded")
    body = b'{"amount":1.50,  "to":"bob"}'
    call = bot.call_in_background("signer:sign", {"data": base64.b64encode(body).decode()})
    pending = bot.wait_pending("signer", "sign")
    c = card(page, pending["id"])
    expect(c.locator("[data-payload-text]")).to_have_text(body.decode(), timeout=3000)
    expect(c.locator("[data-payload-sha256]")).to_have_text(hashlib.sha256(body).hexdigest())
    expect(c.locator("[data-warnings]")).to_have_count(0)
    operator.decide(pending["id"], "deny", "cleanup")
    call.result()

    step("hidden characters show as badges; large numbers keep their digits; approving needs the warnings read")
    body = '{"to":"bob\u202e\u200b","amount":100000000000000000000}'.encode()
    call = bot.call_in_background("signer:sign", {"data": base64.b64encode(body).decode()})
    warned = bot.wait_pending("signer", "sign")
    c = card(page, warned["id"])
    expect(c).to_be_visible(timeout=3000)
    text = c.locator("[data-payload-text]")
    expect(text).to_contain_text('"amount":100000000000000000000}')
    expect(text).not_to_contain_text("e+20")
    expect(text.locator("[data-hidden-char]")).to_have_text(["<U+202E>", "<U+200B>"])
    assert "\u202e" not in text.inner_text() and "\u200b" not in text.inner_text()
    expect(c.locator('[data-warning="inexact_number"]')).to_contain_text("100000000000000000000")
    expect(c.locator('[data-warning="invisible_character"]')).to_have_count(2)
    # What the tool does and what its skill may use, beside the payload.
    expect(c.locator("[data-tool-description]")).to_have_text("test tool sign")
    expect(c.locator("[data-security]")).to_have_text("sign")
    expect(c.locator("[data-network]")).to_have_text("none")
    # The browser will not send the form unticked; without that check the server refuses.
    c.get_by_label("I have read the warnings").evaluate("e => e.removeAttribute('required')")
    c.get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("I have read the warnings")
    assert [a for a in bot.approvals("pending") if a["id"] == warned["id"]], "approved unread"
    page.goto(BASE + "/console/approvals")
    c = card(page, warned["id"])
    c.get_by_label("I have read the warnings").check()
    c.get_by_role("button", name="Approve", exact=True).click()
    page.wait_for_url("**/console/approvals?done=approved")
    result = call.result()
    assert result["success"] is True and result["data"]["ok"] is True, result
    # Decided recently: newest decision first, one row each.
    expect(page.locator("#decided tbody tr").first).to_have_attribute("data-approval", warned["id"])

    step("a cross-origin post from this host is refused even with the cookie and the token")
    note_pending = [a for a in bot.approvals("pending") if a["tool"] == "write_note"][0]
    attack = ctx.new_page()
    attack.goto(evil_server("127.0.0.1", attack_page(note_pending["id"], csrf)))
    with attack.expect_navigation():
        attack.get_by_role("button", name="Win a prize").click()
    assert attack.url.startswith(BASE + "/console/approvals/"), attack.url
    expect(attack.get_by_role("alert")).to_contain_text("cross-site requests are refused")
    assert bot.json("GET", "/v1/approvals")["approvals"], "approvals readable"
    still = [a for a in bot.approvals("pending") if a["id"] == note_pending["id"]]
    assert still, "the cross-origin post decided the approval"

    step("a cross-site post (another site: no cookie sent) is refused")
    attack.goto(evil_server("localhost", attack_page(note_pending["id"], csrf)))
    with attack.expect_navigation():
        attack.get_by_role("button", name="Win a prize").click()
    expect(attack.get_by_role("alert")).to_contain_text("no console session")
    assert [a for a in bot.approvals("pending") if a["id"] == note_pending["id"]]
    attack.close()

    step("a post without the CSRF token, or with a wrong one, is refused")
    for form in ({"decision": "approve"}, {"decision": "approve", "csrf": csrf[:-1] + "x"}):
        r = ctx.request.post(
            f"{BASE}/console/approvals/{note_pending['id']}",
            form=form,
            headers={"Origin": BASE},
            max_redirects=0,
        )
        assert r.status == 403, (r.status, r.text())
        assert "CSRF token is missing or wrong" in r.text(), r.text()
    r = ctx.request.post(
        f"{BASE}/console/approvals/{note_pending['id']}",
        form={"decision": "approve", "csrf": csrf},
        max_redirects=0,
    )
    assert r.status == 403 and "no Origin header" in r.text(), (r.status, r.text())
    assert [a for a in bot.approvals("pending") if a["id"] == note_pending["id"]]

    step("allow this tool for N minutes: bounded, visible, revocable")
    page.goto(BASE + "/console/approvals")
    c = card(page, note_pending["id"])
    # The page's own max stops this in the browser; remove it to see the server refuse too.
    c.get_by_label("minutes").evaluate("e => e.removeAttribute('max')")
    c.get_by_label("minutes").fill("1000")
    c.get_by_role("button", name="Allow this tool").click()
    expect(page.get_by_role("alert")).to_contain_text("allow_max_minutes")
    assert [a for a in bot.approvals("pending") if a["id"] == note_pending["id"]]
    page.goto(BASE + "/console/approvals")
    c = card(page, note_pending["id"])
    c.get_by_label("minutes").fill("5")
    c.get_by_role("button", name="Allow this tool").click()
    page.wait_for_url("**/console/approvals?done=approved")
    assert note.result()["success"] is True
    expect(page.locator("#allowances")).to_contain_text("signer:write_note")
    before = len(bot.approvals())
    allowed = bot.call("signer:write_note", {"text": "no question asked"})
    assert allowed["success"] is True and "approval_id" not in allowed, allowed
    assert len(bot.approvals()) == before, "an allowed call asked anyway"
    page.locator("#allowances").get_by_role("button", name="Revoke").click()
    page.wait_for_url("**/console/approvals?done=revoked")
    expect(page.locator("#allowances")).to_have_count(0)
    call = bot.call_in_background("signer:write_note", {"text": "asks again"})
    again = bot.wait_pending("signer", "write_note")
    operator.decide(again["id"], "deny")
    assert call.result()["error_kind"] == "approval_denied"

    step("the other pages render")
    route_id = bot.json("POST", "/v1/route", {"query": "echo this text back"})["route_id"]
    for path, where, text in (
        ("/console/skills", "#skills", "signer"),
        ("/console/calls?skill=signer&outcome=approval_denied", "#calls", "approval_denied"),
        ("/console/routes", "#routes", route_id),
        (f"/console/routes/{route_id}", "#candidates", "echo"),
    ):
        r = page.goto(BASE + path)
        assert r.status == 200, (path, r.status)
        check_headers(r)
        expect(page.locator(where)).to_contain_text(text)
    page.goto(BASE + "/console/calls?skill=signer&outcome=success")
    # Approved: two notes, the allowed one, two signatures; and the tool whose signature was
    # denied (the tool itself succeeded, reporting the refusal).
    expect(page.locator("#calls tbody tr")).to_have_count(6)
    # Each call names the bot that made it, and the skills page the bots that may use a skill.
    expect(page.locator("#calls td.caller").first).to_have_text(BOT_NAME)
    if BOT_NAME != "operator":
        page.goto(BASE + "/console/skills")
        expect(page.locator("#skills td.bots").first).to_contain_text(BOT_NAME)

    # The refusals this script asks for (the wrong token's 401, the oversized allowance's
    # 400) are logged by the browser as failed resources; nothing else may be.
    expected = "Failed to load resource: the server responded with a status of 40"
    problems = [p for p in problems if not p.startswith(expected)]
    assert not problems, problems

    step("an approval's link (what MCP clients and the CLI print) leads there after sign-in")
    fresh = browser.new_context()
    link_page = fresh.new_page()
    link_page.goto(f"{BASE}/console/approvals/{note_pending['id']}")
    link_page.get_by_label("API token").fill(TOKEN)
    link_page.get_by_role("button", name="Sign in").click()
    link_page.wait_for_url(f"{BASE}/console/approvals/{note_pending['id']}")
    expect(card(link_page, note_pending["id"])).to_be_visible()
    fresh.close()

    step("every page fits a 420 px wide phone screen without sideways scrolling")
    call = bot.call_in_background("signer:sign", {"data": base64.b64encode(("x" * 300 + "\u202e" + "9" * 80).encode()).decode()})
    wide = bot.wait_pending("signer", "sign")
    phone = browser.new_context(viewport={"width": 420, "height": 860})
    phone_page = phone.new_page()
    phone_page.goto(BASE + "/console/")
    pages = [
        "/console/",
        "/console/approvals",
        f"/console/approvals/{wide['id']}",
        "/console/skills",
        "/console/calls",
        "/console/routes",
        f"/console/routes/{route_id}",
    ]
    narrow = phone_page.evaluate("document.documentElement.scrollWidth")
    assert narrow <= 420, ("/console/ (sign-in)", narrow)
    phone_page.get_by_label("API token").fill(TOKEN)
    phone_page.get_by_role("button", name="Sign in").click()
    phone_page.wait_for_url(BASE + "/console/approvals")
    for path in pages[1:]:
        phone_page.goto(BASE + path)
        width = phone_page.evaluate("document.documentElement.scrollWidth")
        print(f"   {path}: scrollWidth {width}", flush=True)
        assert width <= 420, (path, width)
    phone.close()
    operator.decide(wide["id"], "deny", "cleanup")
    call.result()

    step("sign out ends the session")
    page.goto(BASE + "/console/approvals")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(BASE + "/console/")
    r = ctx.request.get(BASE + "/console/approvals", max_redirects=0)
    assert r.status == 303, r.status
    browser.close()

print("console browser checks passed")
