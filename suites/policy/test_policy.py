"""needs_user: login, CAPTCHA and sensitive submits go to the user, with 0 real writes."""

from __future__ import annotations

import pytest

from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient
from runtime.policy import CAPTCHA, PAYMENT, PRESSED, SIGN_IN
from suites.harness import Agent, ref_of
from suites.proofs import assert_handed_over, assert_no_writes


@pytest.mark.req("policy:login", "reason:needs_user")
async def test_a_login_form_is_the_users_to_fill_and_submit(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/login/")
    seen = await agent.observe(page="left")
    typed = await agent.act(seen, type="type", ref=ref_of(seen, "textbox"), text="ada")
    assert_handed_over(typed)
    assert typed.message == SIGN_IN  # the page's visible password field alone: typing into "Email" commits nothing
    assert_handed_over(await agent.act(seen, type="click", ref=ref_of(seen, "button", "Sign in")))
    assert_no_writes(fixture_server)


@pytest.mark.req("policy:captcha", "reason:needs_user")
async def test_a_captcha_is_the_users_to_solve(one_page_desk, agent: Agent, fixture_server: FixtureServer) -> None:
    await one_page_desk("/captcha/")
    seen = await agent.observe(page="left")
    # (The sign-up form around the challenge has a password field, so the sign-in rule decides here: the CAPTCHA
    # rule alone decides on `/rules/captcha`, below.)
    assert_handed_over(await agent.act(seen, type="click", ref=ref_of(seen, "checkbox")))
    assert_no_writes(fixture_server)


@pytest.mark.parametrize("button", ["Pay now", "Delete account"])
@pytest.mark.req("policy:sensitive", "reason:needs_user")
async def test_a_payment_or_deletion_is_the_users_to_confirm(
    one_page_desk, agent: Agent, fixture_server: FixtureServer, button: str
) -> None:
    await one_page_desk("/sensitive/")
    seen = await agent.observe(page="left")
    assert_handed_over(await agent.act(seen, type="click", ref=ref_of(seen, "button", button)))
    assert_no_writes(fixture_server)


@pytest.mark.req("policy:dialog", "reason:needs_user")
async def test_a_dialog_an_action_opens_is_left_to_the_user_and_the_page_is_usable_once_they_answer(
    one_page_desk, agent: Agent, fixture_server: FixtureServer, lab_cdp: CDPClient
) -> None:
    desk = await one_page_desk("/sensitive/")
    # The user's own view of the page (the lab's connection, never counted): it sees the dialog and answers it.
    user = (await lab_cdp.send("Target.attachToTarget", {"targetId": desk.labs["A"].target_id, "flatten": True}))[
        "sessionId"
    ]
    await lab_cdp.send("Page.enable", session_id=user)
    dialog = lab_cdp.wait_for_event("Page.javascriptDialogOpening", session_id=user)  # registered before acting
    seen = await agent.observe(page="left")

    acted = await agent.act(seen, type="click", ref=ref_of(seen, "button", "Email me these invoices"))
    assert "Email 2 invoices" in (await dialog)["message"]
    assert_handed_over(acted)
    assert "dialog" in acted.message
    # While it is open, the session's observe and verify say so at once (the Page's renderer would answer nothing).
    for blocked in (
        await agent.call(command="observe", computer_session_id=seen.computer_session_id),
        await agent.verify(seen, type="text_present", text="Billing"),
    ):
        assert_handed_over(blocked)
        assert "dialog" in blocked.message
    assert_no_writes(fixture_server)  # nobody said OK

    sent = fixture_server.wait_for_request("/sensitive/invoices")  # registered before the user answers
    closed = lab_cdp.wait_for_event("Page.javascriptDialogClosed", session_id=user)
    await lab_cdp.send("Page.handleJavaScriptDialog", {"accept": True}, session_id=user)
    await sent
    await closed
    assert len(fixture_server.ledger.writes("/sensitive/invoices")) == 1
    # The user reads the answer before handing back (bounded, in the page): the backend's own connection has long
    # heard of the close by then, as it would have in real use.
    shown = """new Promise((ok, no) => {
        const timer = setTimeout(() => no(new Error("no answer shown")), 8000);
        const check = () => document.body.innerText.includes("We emailed 2 invoices") && (clearTimeout(timer), ok(1));
        if (!check()) new MutationObserver(check).observe(document, {subtree: true, childList: true});
    })"""
    await lab_cdp.send("Runtime.evaluate", {"expression": shown, "awaitPromise": True}, session_id=user)
    again = await agent.observe(page="left")
    assert again.status == "ok", again
    assert "We emailed 2 invoices" in (again.observation or "")


@pytest.mark.negative_control
@pytest.mark.sabotage("answer_dialogs")
@pytest.mark.req("policy:dialog")
async def test_the_no_write_check_catches_a_runtime_that_answers_the_dialog_itself(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/sensitive/")
    seen = await agent.observe(page="left")
    sent = fixture_server.wait_for_request("/sensitive/invoices")  # registered before acting
    await agent.act(seen, type="click", ref=ref_of(seen, "button", "Email me these invoices"))
    await sent
    with pytest.raises(AssertionError, match="real writes"):
        assert_no_writes(fixture_server)


@pytest.mark.req("policy:reading-allowed")
async def test_reading_a_login_page_is_still_allowed(one_page_desk, agent: Agent) -> None:
    await one_page_desk("/login/")
    seen = await agent.observe(page="left")
    assert "Sign in" in (seen.observation or "")


@pytest.mark.negative_control
@pytest.mark.sabotage("no_policy")
@pytest.mark.req("policy:login")
async def test_the_no_write_check_catches_a_runtime_without_policy(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/login/")
    seen = await agent.observe(page="left")
    seen = await agent.act(seen, type="type", ref=ref_of(seen, "textbox"), text="ada@example.com")
    if "assword" in seen.known:  # a password field, if the backend lists it as a textbox
        seen = await agent.act(seen, type="type", ref=ref_of(seen, "textbox", "assword"), text="hunter2")
    await agent.act(seen, type="click", ref=ref_of(seen, "button", "Sign in"))
    with pytest.raises(AssertionError, match="real writes"):
        assert_no_writes(fixture_server)


# -- each rule alone decides a live write (issue 30) ---------------------------------------------------------------
# On `/rules/` (fixtures_sites/scenarios/rules.py) every control trips exactly one rule of runtime/policy.py: no
# visible password, card field or CAPTCHA on the page, no sensitive name but the one a name rule is about. A rule that
# stopped firing lets its write through (the ledger counts it); one that fired with another rule's words fails its
# message. Messages are the runtime's own, asserted whole where the model reads a concept from them.
RULES: list[tuple[str, dict[str, object], tuple[str, ...], str]] = [
    # (what, the action, the element's needles for ref_of (empty: none), the message, or the start of it)
    ("name", {"type": "click"}, ("button", '"Delete"'),
     "This control is a sensitive or irreversible action (delete). The user must confirm it."),
    ("press listener", {"type": "click"}, ("button", '"Save draft"'), PRESSED),
    ("names disagree", {"type": "click"}, ("button", '"Save"'), "This control's accessible name and its visible text"),
    ("pointer listener", {"type": "click"}, ("button", '"Save preferences"'), "This control reacts to the pointer"),
    ("choice", {"type": "select", "values": ["Send €50 to savings every week"]}, ("combobox", "Standing instruction"),
     "This choice is a sensitive or irreversible action (send). The user must make it themselves."),
    ("form's hidden password", {"type": "click"}, ("button", '"Next"'), SIGN_IN),
    ("form's submit control", {"type": "type", "text": "Enjoy", "submit": True}, ("textbox", "Gift note"),
     "This submits a sensitive or irreversible form (order). The user must confirm it themselves."),
    ("link's address", {"type": "click"}, ("link", '"Details"'),
     "This link performs an action (delete). The user must confirm it themselves."),
    ("another site's form", {"type": "click"}, ("button", '"Join"'),
     "This control is part of another site's form embedded in the Page."),
]  # fmt: skip


@pytest.mark.req("policy:sensitive", "reason:needs_user")
async def test_each_rule_alone_hands_its_write_to_the_user_with_its_own_message(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/rules/")
    seen = await agent.observe(page="left")
    for what, action, needles, message in RULES:
        acted = await agent.act(seen, **action, ref=ref_of(seen, *needles))
        assert_handed_over(acted, what)
        assert acted.message.startswith(message), f"{what}: {acted.message}"
    for url, message in (
        (fixture_server.url("/rules/", cross=True), "This navigation leaves the origin the user authorized"),
        (fixture_server.url("/rules/delete?id=1"), "This address performs an action (delete)."),
    ):
        acted = await agent.act(seen, type="navigate", url=url)
        assert_handed_over(acted, url)
        assert acted.message.startswith(message), f"{url}: {acted.message}"
    assert_no_writes(fixture_server)


@pytest.mark.parametrize(("path", "needles", "message"), [
    ("/rules/card", ("button", '"Save note"'), PAYMENT),
    ("/rules/captcha", ("checkbox", "not a robot"), CAPTCHA),
])  # fmt: skip
@pytest.mark.req("policy:structure", "reason:needs_user")
async def test_card_fields_or_a_challenge_anywhere_on_the_page_make_a_silent_write_the_users(
    one_page_desk, agent: Agent, fixture_server: FixtureServer, path: str, needles: tuple[str, ...], message: str
) -> None:
    """The control names nothing, submits no form and listens for nothing: the page-level rule alone decides."""
    await one_page_desk(path)
    seen = await agent.observe(page="left")
    acted = await agent.act(seen, type="click", ref=ref_of(seen, *needles))
    assert_handed_over(acted)
    assert acted.message == message
    assert_no_writes(fixture_server)
