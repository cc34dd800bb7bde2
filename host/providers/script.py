"""The script provider: a deterministic stand-in for a model, for the demo and the acceptance suites.

A task file (JSON, at most 1 MB) is a list of steps; one step is one model reply: `{"say": "markdown",
"calls": [{"name": "computer_use", "arguments": {...}}]}`. The provider keeps no state of its own: the next step
is the number of `AssistantTurn`s already in the transcript, so a retried request gets the same step again and a
new turn goes on where the last one stopped. When the steps run out it replies with a final text and no calls.

Argument values may be references, resolved against the earlier `ToolResults` of the transcript (each result's
text is the JSON of a `ComputerUseResult`); the newest matching result wins:
- `{"$page": "<substring of title or url>"}` → that Page's handle from the latest `list_pages` result;
- `{"$session": "<page substring>"}` → the `computer_session_id` of the latest result on that Page;
- `{"$frame": "<page substring>"}` → the latest `frame_id` on that Page;
- `{"$next_offset": "<page substring>"}` → the latest `next_offset` on that Page (continue its frame's elements);
- `{"$ref": ["role", "name substring"]}` → the ref of the element line `ref role "name"` of the latest
  observation that has one (an act's changes list only what changed: the refs of unchanged elements stay valid,
  so an older observation still answers for them).
Substrings match case-insensitively; a reference that matches nothing, or several things, is a
`ProviderError(kind="script")` naming the step, never a guess.

A step's `say` may also be a list of strings and `{"$match": ["<page substring>", "<regex>"]}` parts, joined: a
match part is the text the regex captured (its first group, else the whole match) in the newest observation on
that Page in which it matches at all (Python `re`, multiline). All its matches there must capture one and the same
text; none anywhere, or two different texts, is a `ProviderError(kind="script")`. This is how a script's final
answer is read from what the tools returned rather than written into the script (the evaluation set's script,
`host/evals/script.json`): the script's author still chooses the pattern, so it proves that the answer is in the
results, not that anything reasoned its way to it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from host.providers.base import (
    AssistantTurn,
    Entry,
    ModelReply,
    ProviderError,
    TextSink,
    ToolCall,
    ToolResults,
    ToolSpec,
)
from runtime.models import from_text

MAX_BYTES = 1_000_000
MAX_STEPS = 1000
MAX_CALLS = 16
MAX_SAY = 20_000
REFERENCES = ("$page", "$session", "$frame", "$next_offset", "$ref")
MATCH = "$match"
FINAL = "The script has no more steps."
UNCONFIGURED = (
    "No model is configured. Set ANTHROPIC_API_KEY or OPENAI_API_KEY and start `computer-use app` again, "
    "or pass `--provider script --script FILE` to run a scripted task."
)

# `ref role "name"`, then what element_line may add: ` ="value"`, ` checked`/` unchecked`, ` disabled`; in an
# act's changes, after `~ ` (changed) or `+ ` (added).
ELEMENT_LINE = re.compile(
    r'^(?:[~+] )?(?P<ref>[\w-]*\d) (?P<role>\S+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?'
    r'(?: =".*")?(?: (?:un)?checked)?(?: disabled)?$'
)


Say = str | tuple[str | dict[str, Any], ...]
"""A step's text: a string, or parts joined after their `$match` references are resolved."""


@dataclass(frozen=True)
class ScriptStep:
    say: Say
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()


class ScriptError(ValueError):
    """A task file that is not a valid script (raised while loading, with where and what)."""


def _check_value(value: Any, where: str) -> None:
    """References are checked when the file loads, so a typo fails at start, not in the middle of a task."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_value(item, f"{where}[{index}]")
        return
    if not isinstance(value, dict):
        return
    dollars = [key for key in value if isinstance(key, str) and key.startswith("$")]
    if not dollars:
        for key, item in value.items():
            _check_value(item, f"{where}.{key}")
        return
    if len(value) != 1 or dollars[0] not in REFERENCES:
        raise ScriptError(f"{where}: a reference is one key of {', '.join(REFERENCES)}, got {sorted(value)}")
    key, target = dollars[0], value[dollars[0]]
    if key == "$ref":
        if not (isinstance(target, list) and len(target) == 2 and all(isinstance(part, str) for part in target)):
            raise ScriptError(f'{where}: $ref takes ["role", "name substring"], got {json.dumps(target)[:80]}')
    elif not isinstance(target, str):
        raise ScriptError(f"{where}: {key} takes a substring of a Page's title or url, got {json.dumps(target)[:80]}")


def _parse_say(say: Any, where: str) -> Say:
    if isinstance(say, str):
        if len(say) > MAX_SAY:
            raise ScriptError(f'{where}: "say" is a string of at most {MAX_SAY} characters')
        return say
    if not isinstance(say, list) or len(say) > MAX_CALLS * 4:
        raise ScriptError(f'{where}: "say" is a string, or a list of strings and {{"{MATCH}": [page, regex]}} parts')
    parts: list[str | dict[str, Any]] = []
    for index, part in enumerate(say):
        at = f"{where}, say[{index}]"
        if isinstance(part, str):
            parts.append(part)
            continue
        if not (isinstance(part, dict) and set(part) == {MATCH}):
            raise ScriptError(f'{at}: a part is a string or {{"{MATCH}": ["page substring", "regex"]}}')
        target = part[MATCH]
        if not (isinstance(target, list) and len(target) == 2 and all(isinstance(t, str) for t in target)):
            raise ScriptError(f'{at}: {MATCH} takes ["page substring", "regex"], got {json.dumps(target)[:80]}')
        try:
            re.compile(target[1], re.MULTILINE)
        except re.error as exc:
            raise ScriptError(f"{at}: {MATCH} has an invalid regex: {exc}") from None
        parts.append({MATCH: list(target)})
    if sum(len(part) for part in parts if isinstance(part, str)) > MAX_SAY:
        raise ScriptError(f'{where}: "say" is at most {MAX_SAY} characters')
    return tuple(parts)


def parse_steps(data: Any) -> list[ScriptStep]:
    if not isinstance(data, list):
        raise ScriptError("a script is a JSON list of steps")
    if len(data) > MAX_STEPS:
        raise ScriptError(f"a script has at most {MAX_STEPS} steps, this one has {len(data)}")
    steps = []
    for number, raw in enumerate(data, 1):
        where = f"step {number}"
        if not isinstance(raw, dict) or not set(raw) <= {"say", "calls"}:
            raise ScriptError(f'{where}: a step is an object with "say" and/or "calls"')
        say, calls = _parse_say(raw.get("say", ""), where), raw.get("calls", [])
        if not isinstance(calls, list) or len(calls) > MAX_CALLS:
            raise ScriptError(f'{where}: "calls" is a list of at most {MAX_CALLS} calls')
        parsed = []
        for index, call in enumerate(calls):
            at = f"{where}, call {index + 1}"
            if not isinstance(call, dict) or set(call) != {"name", "arguments"}:
                raise ScriptError(f'{at}: a call is {{"name": ..., "arguments": {{...}}}}')
            if not isinstance(call["name"], str) or not call["name"] or not isinstance(call["arguments"], dict):
                raise ScriptError(f"{at}: name is a tool name and arguments an object")
            _check_value(call["arguments"], f"{at}: arguments")
            parsed.append((call["name"], call["arguments"]))
        steps.append(ScriptStep(say, tuple(parsed)))
    return steps


@dataclass(frozen=True)
class _Seen:
    """One earlier tool result, with the arguments of the call that produced it."""

    arguments: dict[str, Any]
    result: dict[str, Any]


def _parse_result(text: str) -> dict[str, Any] | None:
    """The result a tool answer's text carries (`runtime.models.as_text`); only element lines are read from its
    observation, so a note the host appended after it (the image placeholder) is harmless."""
    try:
        return from_text(text.lstrip())
    except ValueError:  # json.JSONDecodeError included
        return None


def _history(transcript: Sequence[Entry]) -> list[_Seen]:
    calls: dict[str, ToolCall] = {}
    seen: list[_Seen] = []
    for entry in transcript:
        if isinstance(entry, AssistantTurn):
            calls.update((call.id, call) for call in entry.tool_calls)
        elif isinstance(entry, ToolResults):
            for result in entry.results:
                data = _parse_result(result.text)
                if data is not None:
                    call = calls.get(result.call_id)
                    seen.append(_Seen(call.arguments if call else {}, data))
    return seen


def _matches(page: Any, needle: str) -> bool:
    if not isinstance(page, dict):
        return False
    return any(_has(str(page.get(field, "")), needle) for field in ("title", "url"))


def _has(text: str, needle: str) -> bool:
    return needle.lower() in text.lower()


def _elements(observation: str) -> Iterator[tuple[str, str, str]]:
    for line in observation.splitlines():
        found = ELEMENT_LINE.match(line)
        if found:
            yield found["ref"], found["role"], found["name"] or ""


class _Resolver:
    def __init__(self, history: list[_Seen], step: int) -> None:
        self.newest_first = history[::-1]
        self.step = step
        # observe and act name their Page; verify names only its session: learn which Page each session is on.
        self.session_page: dict[str, Any] = {}
        for seen in history:
            session = seen.result.get("computer_session_id")
            if isinstance(session, str) and isinstance(seen.result.get("page"), dict):
                self.session_page[session] = seen.result["page"]

    def fail(self, reference: dict[str, Any], why: str) -> ProviderError:
        return ProviderError("script", f"step {self.step}: {json.dumps(reference)[:120]} {why}")

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1 and next(iter(value)) in REFERENCES:
            ((key, target),) = value.items()
            return getattr(self, key[1:])(target, value)
        return {key: self.resolve(item) for key, item in value.items()}

    def page(self, needle: str, reference: dict[str, Any]) -> str:
        for seen in self.newest_first:
            pages = seen.result.get("pages")
            if isinstance(pages, list):
                found = [page for page in pages if _matches(page, needle)]
                if len(found) == 1 and isinstance(found[0].get("handle"), str):
                    return found[0]["handle"]
                names = ", ".join(f"{page.get('title')!r}" for page in pages[:10] if isinstance(page, dict))
                why = "matches no Page" if not found else f"matches {len(found)} Pages"
                raise self.fail(reference, f"{why} of the latest list_pages (Pages: {names or 'none'})")
        raise self.fail(reference, "needs an earlier list_pages result")

    def _page_of(self, seen: _Seen) -> Any:
        session = seen.result.get("computer_session_id")
        return seen.result.get("page") or self.session_page.get(session or "")

    def _on_page(self, field: str, needle: str, reference: dict[str, Any], kind: type = str) -> Any:
        for seen in self.newest_first:
            value = seen.result.get(field)
            if isinstance(value, kind) and not isinstance(value, bool) and _matches(self._page_of(seen), needle):
                return value
        raise self.fail(reference, f"finds no earlier result with a {field} on a Page matching {needle!r}")

    def next_offset(self, needle: str, reference: dict[str, Any]) -> int:
        return self._on_page("next_offset", needle, reference, int)

    def say(self, say: Say) -> str:
        if isinstance(say, str):
            return say
        return "".join(part if isinstance(part, str) else self.match(*part[MATCH], part) for part in say)

    def match(self, needle: str, pattern: str, reference: dict[str, Any]) -> str:
        regex = re.compile(pattern, re.MULTILINE)
        for seen in self.newest_first:
            observation = seen.result.get("observation")
            if not isinstance(observation, str) or not _matches(self._page_of(seen), needle):
                continue
            found = {m.group(1) if regex.groups else m.group(0) for m in regex.finditer(observation)}
            if len(found) == 1:
                return found.pop()
            if found:
                values = ", ".join(repr(value[:40]) for value in sorted(found)[:5])
                raise self.fail(reference, f"captures {len(found)} different texts in one observation ({values})")
        raise self.fail(reference, f"matches in no earlier observation on a Page matching {needle!r}")

    def session(self, needle: str, reference: dict[str, Any]) -> str:
        return self._on_page("computer_session_id", needle, reference)

    def frame(self, needle: str, reference: dict[str, Any]) -> str:
        return self._on_page("frame_id", needle, reference)

    def ref(self, target: list[str], reference: dict[str, Any]) -> str:
        role, needle = target
        for seen in self.newest_first:
            observation = seen.result.get("observation")
            if not isinstance(observation, str):
                continue
            found = [(ref, name) for ref, r, name in _elements(observation) if r == role and _has(name, needle)]
            exact = [ref for ref, name in found if name == needle]
            if len(found) == 1:
                return found[0][0]
            if len(exact) == 1:
                return exact[0]
            if found:
                raise self.fail(reference, f"matches {len(found)} elements of the latest observation that has any")
        raise self.fail(reference, "matches no element line of any earlier observation")


def _chunks(text: str, parts: int = 3) -> list[str]:
    """`text` in up to `parts` pieces cut at whitespace, so the console sees it stream like a model's."""
    words = re.split(r"(?<=\s)", text)
    size = max(1, -(-len(words) // parts))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size) if "".join(words[i : i + size])]


class ScriptProvider:
    name = "script"
    model = "script"

    def __init__(self, steps: Sequence[ScriptStep], *, final: str = FINAL, source: str = "script") -> None:
        self.steps = tuple(steps)
        self.final = final
        self.source = source

    @classmethod
    def load(cls, path: Path) -> ScriptProvider:
        """A task file, validated; `ProviderError(kind="script")` saying what is wrong with it."""
        try:
            with path.open("rb") as file:
                raw = file.read(MAX_BYTES + 1)
        except OSError as exc:
            raise ProviderError("script", f"cannot read the script {path}: {exc.strerror or exc}") from None
        if len(raw) > MAX_BYTES:
            raise ProviderError("script", f"the script {path} is larger than {MAX_BYTES} bytes")
        try:
            steps = parse_steps(json.loads(raw.decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ProviderError("script", f"the script {path} is not JSON: {exc}") from None
        except ScriptError as exc:
            raise ProviderError("script", f"the script {path}: {exc}") from None
        return cls(steps, source=path.name)

    @classmethod
    def unconfigured(cls) -> ScriptProvider:
        """What the app runs when no model is configured: every request answers how to configure one."""
        return cls((), final=UNCONFIGURED, source="none")

    async def complete(
        self, system: str, transcript: Sequence[Entry], tools: Sequence[ToolSpec], on_text: TextSink
    ) -> ModelReply:
        index = sum(isinstance(entry, AssistantTurn) for entry in transcript)
        if index >= len(self.steps):
            say, calls = self.final, ()
        else:
            step = self.steps[index]
            resolver = _Resolver(_history(transcript), index + 1)
            say = resolver.say(step.say)
            calls = tuple(
                ToolCall(id=f"script-{index + 1}-{number + 1}", name=name, arguments=resolver.resolve(arguments))
                for number, (name, arguments) in enumerate(step.calls)
            )
        for chunk in _chunks(say):
            await on_text(chunk)
        return ModelReply(say, calls)

    async def close(self) -> None:
        return None
