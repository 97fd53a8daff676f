"""Suggested pins: what the overlay lists under its ``suggested pins`` delimiter, and the user's answer.

Suggestions come from the model (``suggest_pins``, stored until decided) and from activation
(items scoring above ``activation.suggest_threshold`` that no pin covers). Only the user turns a
suggestion into a pin — leased by default, sticky when the user says so; a rejected suggestion
stays rejected for the session, whichever source raises it again.
"""
from __future__ import annotations

from typing import Any

from ctxbench.records.turns import PinSuggestionView
from ctxbench.llm.ports import UnitOfWork
from ctxbench.records.vocab import ACTIVATION_SUGGESTION_PREFIXES
from ctxbench.records.item_refs import card_symbol



def open_suggestions(workbench: UnitOfWork, session_id: str) -> tuple[PinSuggestionView, ...]:
    """The suggestions to show now: the model's open ones, then activation's, none already pinned or rejected."""
    from ctxbench.planner import activation as activation_rules

    traces = workbench.traces
    scores = workbench.activation.scores(session_id)
    pins = workbench.pins.list(session_id)
    pinned = {p.target for p in pins}
    decided = {s.target for status in ("accepted", "rejected") for s in traces.suggestions(session_id, status)}
    out: dict[str, PinSuggestionView] = {}
    for s in traces.suggestions(session_id):
        if s.target not in pinned:
            out[s.target] = PinSuggestionView(s.target, s.reason, s.source, scores.get(s.target, 0.0))
    for target in activation_rules.suggest_pins(scores, pins, workbench.config.planner.activation):
        if target.startswith(ACTIVATION_SUGGESTION_PREFIXES) and target not in out and target not in decided:
            out[target] = PinSuggestionView(target, f"activation {scores[target]:.2f}", "activation", scores[target])
    return tuple(out.values())


def record_decision(workbench: UnitOfWork, session_id: str, target: str, *, accept: bool) -> None:
    """Store the user's answer to a suggestion, so it is not raised again (whoever raised it)."""
    traces = workbench.traces
    source = next((s.source for s in traces.suggestions(session_id) if s.target == target), "activation")
    with workbench.transaction():
        traces.add_suggestion(session_id, target, "", source, "")
        traces.decide_suggestion(session_id, target, accepted=accept)


def decide(workbench: UnitOfWork, session_id: str, target: str, *, accept: bool, kind: str = "leased",
           scope: str = "turn", content: str = "", label: str = "", code: Any = None) -> Any:
    """The user accepts (returns the new Pin) or rejects (returns None) a suggestion.

    An accepted card gets its card text as the pin's content (from ``code`` when given) so it
    renders even when retrieval no longer finds it.
    """
    if kind not in ("sticky", "leased"):
        raise ValueError("an accepted suggestion becomes a sticky or a leased pin")
    record_decision(workbench, session_id, target, accept=accept)
    if not accept:
        return None
    symbol = card_symbol(target)
    if not content and symbol is not None and code is not None:
        card = getattr(getattr(code, "index", None), "cards", {}).get(symbol)
        if card is not None:
            content = card.render()
    return workbench.pins.add(session_id, target, kind, scope=scope, label=label, content=content, source="user")
