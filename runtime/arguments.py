"""The model's arguments to `computer_use`, validated before anything else happens.

The token is not among them: it travels in the request's `_meta`, outside what a model writes. Every string is
bounded (docs/mcp.md, "Limits"), so an oversized argument is `invalid_arguments` before any backend call.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from runtime.models import Action, Assertion
from runtime.models.action import Short
from runtime.scope import QUERY_CHARS, words_of

Command = Literal["list_pages", "observe", "act", "verify"]
Detail = Literal["interactive", "full", "visual", "diagnostics"]
Id = Short
"""A Page handle, relation word, session or frame id: short tokens the runtime minted or names."""
Query = Annotated[str, StringConstraints(max_length=QUERY_CHARS)]


class ComputerUseArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: Command
    page: Id | None = None
    detail: Detail = "interactive"
    offset: int = Field(0, ge=0)
    query: Query | None = None
    within: Id | None = None
    computer_session_id: Id | None = None
    frame_id: Id | None = None
    action: Action | None = None
    assertion: Assertion | None = None

    @model_validator(mode="after")
    def _fields_for_command(self) -> ComputerUseArgs:
        if self.command == "observe" and self.page is None and self.computer_session_id is None:
            raise ValueError("observe needs page (a handle from list_pages or a relation word) or computer_session_id")
        if self.command == "act" and (self.computer_session_id is None or self.frame_id is None or self.action is None):
            raise ValueError("act needs computer_session_id, frame_id (the latest) and action")
        if self.command == "verify" and (self.computer_session_id is None or self.assertion is None):
            raise ValueError("verify needs computer_session_id and assertion")
        if self.offset and self.command != "observe":
            raise ValueError("offset belongs to observe")
        if (self.query is not None or self.within is not None) and self.command != "observe":
            raise ValueError("query and within belong to observe")
        if self.within is not None and self.computer_session_id is None:
            raise ValueError("within needs computer_session_id: a region ref is one of that session's latest frame")
        if self.query is not None and not words_of(self.query):
            raise ValueError("query needs at least one word (the elements whose name or nearby text has them all)")
        return self
