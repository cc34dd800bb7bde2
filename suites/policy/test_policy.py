"""needs_user: login, CAPTCHA and sensitive submits go to the user, with 0 real writes.
"""

from __future__ import annotations

import pytest

from fixtures_sites.server import FixtureServer
from suites.conftest import Agent, ref_of
from suites.proofs import assert_no_writes


def assert_handed_over(result) -> None:
    assert result.status == "needs_user", f"not handed to the user: {result}"
    assert result.reason_code == "needs_user"


@pytest.mark.req("policy:login", "reason:needs_user")
async def test_a_login_form_is_the_users_to_fill_and_submit(
    single, agent: Agent, fixture_server: FixtureServer
) -> None:
    await single("/login/")
    seen = await agent.observe(page="left")
    assert_handed_over(await agent.act(seen, type="type", ref=ref_of(seen.observation, "textbox"), text="ada"))
    assert_handed_over(await agent.act(seen, type="click", ref=ref_of(seen.observation, "button", "Sign in")))
    assert_no_writes(fixture_server)


@pytest.mark.req("policy:captcha", "reason:needs_user")
async def test_a_captcha_is_the_users_to_solve(single, agent: Agent, fixture_server: FixtureServer) -> None:
    await single("/captcha/")
    seen = await agent.observe(page="left")
    assert_handed_over(await agent.act(seen, type="click", ref=ref_of(seen.observation, "checkbox")))
    assert_no_writes(fixture_server)


@pytest.mark.parametrize("button", ["Pay now", "Delete account"])
@pytest.mark.req("policy:sensitive", "reason:needs_user")
async def test_a_payment_or_deletion_is_the_users_to_confirm(
    single, agent: Agent, fixture_server: FixtureServer, button: str
) -> None:
    await single("/sensitive/")
    seen = await agent.observe(page="left")
    assert_handed_over(await agent.act(seen, type="click", ref=ref_of(seen.observation, "button", button)))
    assert_no_writes(fixture_server)


@pytest.mark.req("policy:reading-allowed")
async def test_reading_a_login_page_is_still_allowed(single, agent: Agent) -> None:
    await single("/login/")
    seen = await agent.observe(page="left")
    assert "Sign in" in (seen.observation or "")


@pytest.mark.negative_control
@pytest.mark.sabotage("no_policy")
@pytest.mark.req("policy:login")
async def test_the_no_write_check_catches_a_runtime_without_policy(
    single, agent: Agent, fixture_server: FixtureServer
) -> None:
    await single("/login/")
    seen = await agent.observe(page="left")
    seen = await agent.act(seen, type="type", ref=ref_of(seen.observation, "textbox"), text="ada@example.com")
    for line in (seen.observation or "").splitlines():
        if "textbox" in line and "assword" in line:
            seen = await agent.act(seen, type="type", ref=line[1 : line.index("]")], text="hunter2")
    await agent.act(seen, type="click", ref=ref_of(seen.observation, "button", "Sign in"))
    with pytest.raises(AssertionError, match="real writes"):
        assert_no_writes(fixture_server)
