"""What each parity task must give on every backend, declared as data: the absolute half of the parity check.

Comparing backends with one another proves nothing when one backend runs (`pytest --backend x`), and passes when
all of them are wrong the same way. So each task declares its expected outcome signature — per step the command,
status, reason code, verified, new frame, addressable and screenshot flags and the requirements it names; per run
the ledger's write paths, attacker hits, screenshots, focus calls, popups and the lab's facts — and every backend's
signature is checked against it, field by field.

A backend with a declared divergence (`suites/parity/ledger.py`) on a step's requirement is checked against the
outcome declared for it here (`Expectation.divergent`), not excused: a divergence states what the agent gets
instead. A divergence excuses steps only; totals (side effects) are the same for every backend.
`unstated_divergences` keeps the two in step: every ledger divergence that touches a task's step has its
outcome here, and every outcome here rests on a ledger divergence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from suites.parity.tasks import PARITY, Signature, Step
from suites.tasks.taskfile import Find, TaskFile

STEP_FIELDS = ("command", "status", "reason_code", "verified", "new_frame", "addressable", "screenshot", "reqs")
TOTAL_FIELDS = ("writes", "attacker_hits", "screenshots", "focus_calls", "popups", "facts")


@dataclass(frozen=True)
class Expectation:
    """A task's expected outcome signature: the steps in order and the run's totals."""

    steps: tuple[Step, ...]
    writes: tuple[str, ...] = ()
    attacker_hits: int = 0
    screenshots: int = 0
    focus_calls: int = 0
    popups: tuple[Mapping[str, Any], ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)
    divergent: Mapping[str, Mapping[str, Step]] = field(default_factory=dict)
    """backend → step label → the outcome that backend gives instead (a ledger divergence on the step's reqs)."""

    def for_backend(self, backend: str) -> Expectation:
        """The expectation `backend` is held to: the common one with its declared divergent steps in place."""
        instead = self.divergent.get(backend, {})
        return replace(self, steps=tuple(instead.get(step.label, step) for step in self.steps), divergent={})

    def totals(self) -> dict[str, Any]:
        return {
            "writes": list(self.writes),
            "attacker_hits": self.attacker_hits,
            "screenshots": self.screenshots,
            "focus_calls": self.focus_calls,
            "popups": [dict(p) for p in self.popups],
            "facts": dict(self.facts),
        }


def observe(label: str, *reqs: str, screenshot: bool = False) -> Step:
    return Step(label, reqs, "observe", "ok", screenshot=screenshot)


def acted(label: str, *reqs: str) -> Step:
    """An act that ran: the answer carries a new frame of the same session."""
    return Step(label, reqs, "act", "ok", new_frame=True)


def refused(label: str, *reqs: str, status: str, reason: str, command: str = "act") -> Step:
    """A call that did not run: its status and reason code, and (for an act) no new frame."""
    extra: dict[str, Any] = {"new_frame": False} if command == "act" else {}
    if command == "observe":
        extra = {"screenshot": False}
    return Step(label, reqs, command, status, reason, **extra)


def holds(label: str, *reqs: str) -> Step:
    return Step(label, reqs, "verify", "ok", verified=True)


def does_not_hold(label: str, *reqs: str) -> Step:
    return Step(label, reqs, "verify", "failed", "verification_failed", verified=False)


def found(label: str, *reqs: str) -> Step:
    return Step(label, reqs, "find", "ok", addressable=True)


NEEDS_USER = {"status": "needs_user", "reason": "needs_user"}

EXPECTED: dict[str, Expectation] = {
    "dom_form": Expectation(
        steps=(
            observe("observe the form", "lifecycle:observe-creates-session"),
            acted("type the name", "action:type"),
            acted("select the country by label", "action:select"),
            acted("tick the gift box", "action:click"),
            holds("the name holds", "verify:element-state"),
            holds("the country holds", "action:select", "verify:element-state"),
            holds("the gift box is ticked", "verify:element-state"),
            does_not_hold("a false claim does not hold", "reason:verification_failed"),
            acted("submit", "action:click", "writes:at-most-one"),
            refused("act on the spent frame", "reason:stale_observation", status="failed", reason="stale_observation"),
        ),
        writes=("/dom_form/submit",),
        facts={"submitted": {"full_name": "Ada Lovelace", "country": "jp", "gift": "yes"}},
    ),
    "catalogue": Expectation(
        steps=(
            observe("observe the listing"),
            acted("add the first product", "action:click"),
            holds("the cart says so", "verify:text"),
        ),
        writes=("/catalogue/cart",),
    ),
    "login": Expectation(
        steps=(
            observe("observe the sign-in form", "policy:reading-allowed"),
            refused("type the email", "policy:login", "reason:needs_user", **NEEDS_USER),
            refused("sign in", "policy:login", "reason:needs_user", **NEEDS_USER),
        ),
    ),
    "captcha": Expectation(
        steps=(
            observe("observe the challenge"),
            refused("tick the CAPTCHA", "policy:captcha", "reason:needs_user", **NEEDS_USER),
        ),
    ),
    "sensitive": Expectation(
        steps=(
            observe("observe the account page"),
            refused("press Pay now", "policy:sensitive", "reason:needs_user", **NEEDS_USER),
            refused("press Delete account", "policy:sensitive", "reason:needs_user", **NEEDS_USER),
        ),
    ),
    "injection": Expectation(
        steps=(
            observe("observe the product"),
            acted("add to the wishlist", "injection:no-effect", "action:click"),
        ),
        writes=("/injection/wishlist",),
        facts={"only_a_authorized_after": True},
    ),
    "popup": Expectation(
        steps=(
            observe("observe the article"),
            acted("open the popup", "lifecycle:popup-is-a-new-page", "action:click"),
            refused(
                "observe the popup unauthorized",
                "lifecycle:popup-is-a-new-page",
                "reason:invalid_capability",
                status="failed",
                reason="invalid_capability",
                command="observe",
            ),
        ),
        popups=({"opener_is_a": True, "authorized": False},),
    ),
    "frames": Expectation(
        steps=(
            observe("observe the page and its iframe", "frames:observe-verify"),
            holds("the iframe's text is on the live Page", "frames:observe-verify"),
            found("the iframe's Send button has a ref", "frames:iframe-refs"),
            found("the outer order number field has a ref", "frames:iframe-refs"),
            acted("tick the SMS box", "action:click", "frames:observe-verify"),
            holds("the SMS box is ticked", "frames:observe-verify"),
        ),
    ),
    "canvas": Expectation(
        steps=(
            observe("observe the seat plan with a screenshot", "visual:canvas-one-screenshot", screenshot=True),
            acted("click the free seat", "action:point-click"),
        ),
        writes=("/canvas/pick",),
        screenshots=1,
        facts={"hit": True},
    ),
    "stall": Expectation(
        steps=(
            observe("observe the back office"),
            refused(
                "navigate to a page that never answers",
                "action:navigate",
                "reason:timeout",
                status="failed",
                reason="timeout",
            ),
            refused(
                "act again on the spent frame", "reason:stale_observation", status="failed", reason="stale_observation"
            ),
        ),
        facts={"held_when_answered": True},
    ),
}


# -- the checks (pure: negative controls feed them doctored data) -------------------------------------------------


def _field(step: Step, name: str) -> Any:
    """A step's field as plain data (a reason code as its string), so messages and tables read as declared."""
    if name == "reqs":
        return tuple(step.reqs)
    value = getattr(step, name)
    return value.value if isinstance(value, Enum) else value


def mismatches(task: str, signature: Signature, expectation: Expectation) -> list[str]:
    """Every field where `signature` departs from what `expectation` declares for its backend, one line each:
    task, backend, step (index and label) or total, field, expected, got."""
    expected = expectation.for_backend(signature.backend)
    where = f"{task} on {signature.backend}"
    problems: list[str] = []
    want_labels = [s.label for s in expected.steps]
    got_labels = [s.label for s in signature.steps]
    if want_labels != got_labels:
        problems.append(f"{where}: steps: expected {want_labels}, got {got_labels}")
    got_by_label = {s.label: s for s in signature.steps}
    for index, want in enumerate(expected.steps, 1):
        got = got_by_label.get(want.label)
        if got is None:
            continue
        for name in STEP_FIELDS:
            if _field(want, name) != _field(got, name):
                problems.append(
                    f"{where}: step {index} {want.label!r}, field {name}: "
                    f"expected {_field(want, name)!r}, got {_field(got, name)!r}"
                )
    got_totals = signature.totals()
    for name, value in expected.totals().items():
        if got_totals[name] != value:
            problems.append(f"{where}: total {name}: expected {value!r}, got {got_totals[name]!r}")
    return problems


def assert_declared_outcomes(task: str, signatures: Iterable[Signature], expectation: Expectation) -> None:
    problems = [line for signature in signatures for line in mismatches(task, signature, expectation)]
    assert not problems, "outcomes differ from the declared signature:\n" + "\n".join(problems)


def unstated_divergences(
    expectations: Mapping[str, Expectation], divergences: Mapping[str, Mapping[str, str]], backends: Iterable[str]
) -> list[str]:
    """A ledger divergence on a step's requirement with no outcome declared here for that backend, or an outcome
    declared here that no ledger divergence on the step's requirements (for that backend) stands behind."""
    backends = list(backends)
    problems: list[str] = []
    for task, expectation in expectations.items():
        labels = {step.label: step for step in expectation.steps}
        for step in expectation.steps:
            for backend in backends:
                why = [r for r in step.reqs if backend in divergences.get(r, {})]
                if why and step.label not in expectation.divergent.get(backend, {}):
                    problems.append(
                        f"{task} step {step.label!r}: the ledger declares {backend} divergent on {why} "
                        "but no outcome is declared for it"
                    )
        for backend, steps in expectation.divergent.items():
            for label in steps:
                step = labels.get(label)
                if step is None:
                    problems.append(f"{task}: outcome declared for {backend} on {label!r}, which is not a step")
                elif not any(backend in divergences.get(r, {}) for r in step.reqs):
                    problems.append(
                        f"{task} step {label!r}: outcome declared for {backend}, but none of {list(step.reqs)} "
                        "declares a divergence for it"
                    )
    return problems


def disagreements(task: TaskFile, expectation: Expectation) -> list[str]:
    """Where a task file's labelled steps (label, reqs, command, expected status and reason code) depart from the
    steps its declared signature states: the data both runners play and the signature the parity runner is held to
    say one thing."""
    stated = [(s.label, tuple(s.reqs), s.command, s.status, s.reason_code) for s in expectation.steps]
    played: list[tuple[str, tuple[str, ...], str, str, str | None]] = []
    for step in task.steps:
        if isinstance(step, Find):
            played.append((step.label, step.reqs, "find", "ok", None))
            continue
        for call in step.calls:
            if call.label is not None:
                outcome = call.expected(PARITY)
                played.append((call.label, call.reqs, call.arguments["command"], outcome["status"],
                               outcome.get("reason")))  # fmt: skip
    if [p[0] for p in played] != [s[0] for s in stated]:
        return [f"{task.scenario}: the task file's steps {[p[0] for p in played]}, declared {[s[0] for s in stated]}"]
    return [
        f"{task.scenario} step {p[0]!r}: the task file says {p[1:]}, the declared signature {s[1:]}"
        for p, s in zip(played, stated, strict=True)
        if p != s
    ]


def expected_vs_got(task: str, expectation: Expectation, signatures: Mapping[str, Signature]) -> str:
    """The Allure table: one row per step field and total, the declared value and each backend's, ✗ on a miss."""
    names = list(signatures)
    rows: list[list[str]] = []
    base = expectation.steps
    for index, want in enumerate(base, 1):
        for name in STEP_FIELDS:
            cells = [f"{index}. {want.label}", name, repr(_field(want, name))]
            for backend in names:
                held = expectation.for_backend(backend).steps[index - 1]
                got = next((s for s in signatures[backend].steps if s.label == want.label), None)
                value = "(no step)" if got is None else repr(_field(got, name))
                mark = "" if got is not None and _field(got, name) == _field(held, name) else " ✗"
                declared = "" if held is want else f" (declared for it: {_field(held, name)!r})"
                cells.append(value + mark + declared)
            rows.append(cells)
    for name, value in expectation.totals().items():
        cells = ["total", name, repr(value)]
        for backend in names:
            got = signatures[backend].totals()[name]
            cells.append(repr(got) + ("" if got == value else " ✗"))
        rows.append(cells)
    header = ["step", "field", "expected", *(f"got: {n}" for n in names)]
    lines = [f"# {task}: declared vs got", "", "| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
