"""The runtime's data model, in the spec's names: Page, PageInfo, Action, Assertion and the result envelope."""

from runtime.models.action import Action
from runtime.models.assertion import Assertion
from runtime.models.page import Geometry, Page, PageInfo, Relation
from runtime.models.result import ComputerUseResult, as_text, from_text

__all__ = [
    "Action",
    "Assertion",
    "ComputerUseResult",
    "Geometry",
    "Page",
    "PageInfo",
    "Relation",
    "as_text",
    "from_text",
]
