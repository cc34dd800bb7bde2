"""`verify`: a runtime assertion checked on the live Page; a model's claim is never success."""

from __future__ import annotations

import asyncio

from runtime.arguments import ComputerUseArgs
from runtime.capability.contexts import PageContext
from runtime.commands.base import VERIFY, Answer, Reach
from runtime.computer_session import ComputerSession
from runtime.models import Assertion
from runtime.reasons import ReasonCode
from runtime.sessions import Refusal
from runtime.settings import Settings
from runtime.verification import failures


class Verify:
    """`verify`. Its seam, what a broken variant may replace in a subclass passed as `Parts.verify`: `run`."""

    def __init__(self, reach: Reach, settings: Settings) -> None:
        self.reach = reach
        self.settings = settings

    async def run(self, session: ComputerSession, args: ComputerUseArgs, context: PageContext) -> Answer:
        assertion: Assertion = args.assertion  # type: ignore[assignment]
        if session.popups_pending:
            raise Refusal(ReasonCode.page_context_stale, "a popup opened by this Page is not registered yet")
        async with self.reach.refusing(session, VERIFY):
            failed = await asyncio.wait_for(
                failures(assertion, session.probe, session.latest), self.settings.observe_timeout
            )
        if failed:
            return Answer(
                "the assertion does not hold on the live Page",
                session,
                code=ReasonCode.verification_failed,
                verified=False,
                failures=failed,
            )
        return Answer("verified on the live Page", session, verified=True)
