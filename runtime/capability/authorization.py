"""Is this Page authorized for this call? Decided here and nowhere else, from the call's Page Context.

The verifier (`runtime/capability/verifier.py`) opens the token and says whether its Page Context is still current;
this module answers, from that context, whether a Page the call names is one of it: a Page named by handle or
relation word (`observe` with `page`), or the Page of the session a call names (`SessionManager.acquire`). The
policy read (`runtime/commands/act.py`) reads the authorized Page's url from the same context as a fact, not a
decision.
"""

from __future__ import annotations

from runtime.capability.contexts import PageContext
from runtime.failures import GONE
from runtime.models.page import RELATIONS, Page
from runtime.reasons import ReasonCode, Refusal
from runtime.registry.pages import PageRegistry, UnknownPage

NOT_AUTHORIZED = "this session's Page is not authorized for this request"


def require_authorized(handle: str, context: PageContext) -> None:
    """Refuse a call on Page `handle` unless its Page Context authorizes it."""
    if handle not in context.revisions:
        raise Refusal(ReasonCode.invalid_capability, NOT_AUTHORIZED)


def authorized_page(word: str, context: PageContext, registry: PageRegistry) -> Page:
    """The Page `word` (a handle or a relation word) names among the authorized ones, still usable: access enabled
    and its target there."""
    page = _named(word, context, registry)
    if not page.access_enabled:
        raise Refusal(ReasonCode.page_access_disabled, "the user disabled access to this Page")
    if registry.is_lost(page):
        raise Refusal(ReasonCode.target_lost, GONE)
    return page


def _named(word: str, context: PageContext, registry: PageRegistry) -> Page:
    if word in context.revisions:  # authorized this turn (it may be gone since: the caller checks)
        return registry.get(word)
    if word in RELATIONS:
        matches = [h for h, info in context.pages.items() if info.relation == word]
        if len(matches) == 1:
            return registry.get(matches[0])
        where = f"{len(matches)} authorized Pages are" if matches else "no authorized Page is"
        raise Refusal(ReasonCode.ambiguous_page, f"{where} {word} of the chat")
    try:
        registry.get(word)
    except UnknownPage:
        raise Refusal(ReasonCode.invalid_arguments, f"no Page {word!r}; use a handle from list_pages") from None
    raise Refusal(ReasonCode.invalid_capability, f"Page {word} is not authorized for this request")
