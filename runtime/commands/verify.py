"""`verify`: a runtime assertion checked on the live Page; a model's claim is never success."""

from __future__ import annotations

import asyncio

from runtime.commands.base import Command, Outcome
from runtime.failures import DIALOG_OPEN, GONE
from runtime.models import Assertion, ComputerUseResult
from runtime.probe import DialogOpen, TargetGone
from runtime.reasons import ReasonCode
from runtime.session import ComputerSession
from runtime.sessions import Refusal
from runtime.verification import failures


class Verifying(Command):
    async def _verify(self, session: ComputerSession, assertion: Assertion) -> Outcome:
        if session.popups_pending:
            raise Refusal(ReasonCode.page_context_stale, "a popup opened by this Page is not registered yet")
        try:
            failed = await asyncio.wait_for(
                failures(assertion, session.probe, session.latest), self.settings.observe_timeout
            )
        except TimeoutError:
            raise Refusal(ReasonCode.timeout, "the Page did not answer the verification in time") from None
        except DialogOpen:
            raise Refusal(ReasonCode.needs_user, DIALOG_OPEN) from None
        except TargetGone:
            self.sessions.invalidate(session, ReasonCode.target_lost, GONE)
            raise Refusal(ReasonCode.target_lost, GONE) from None
        if failed:
            return Outcome(
                ComputerUseResult.fail(
                    ReasonCode.verification_failed,
                    "the assertion does not hold on the live Page",
                    computer_session_id=session.id,
                    verified=False,
                    failures=failed,
                )
            )
        return Outcome(
            ComputerUseResult(
                status="ok", message="verified on the live Page", computer_session_id=session.id, verified=True
            )
        )
