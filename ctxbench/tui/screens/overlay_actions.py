"""What the overlay's keys do to the session: each builds an action for the screen's link to run in a worker."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxbench.records.plans import ContextPlan
from ctxbench.tui import messages as msg
from ctxbench.tui.present import tok
from ctxbench.tui.screens.overlay_rows import OverlayRow
from ctxbench.tui.session_link import Action

if TYPE_CHECKING:  # the engine loads in a worker, never before the first paint
    from ctxbench.service.session import WorkbenchSession


def overlay_action(action: str, row: OverlayRow, plan: ContextPlan | None, **kwargs: Any) -> Action:
    """``pin_sticky``, ``lease`` (``scope=``), ``unpin``, ``drop``, ``accept`` or ``reject`` on ``row``."""
    target = row.target
    label = row.item.label if row.item is not None else (row.suggestion.label if row.suggestion else target)
    suggestion = row.suggestion

    def run(session: WorkbenchSession) -> str | None:
        if action == "pin_sticky":
            said = f"pinned {target} sticky ({session.pin_item(target, 'sticky', label=label, plan=plan).id})"
            note = getattr(session, "pin_note", None)  # a proxied conversation: what the pin costs the cache
            cost = note(target) if note is not None else ""
            return f"{said}: {cost}" if cost else said
        if action == "lease":
            scope = kwargs.get("scope", "turn")
            pin = session.pin_item(target, "leased", scope=scope, label=label, plan=plan)
            return f"leased {target} for this {scope} ({pin.ttl} turns)"
        if action == "unpin":
            return f"unpinned {target}" if session.unpin(target) else f"{target} was not pinned"
        if action == "drop":
            return session.drop(target, plan)
        if action == "accept" and suggestion is not None:
            return f"accepted suggestion: {target} pinned sticky ({session.accept(suggestion, plan).id})"
        if action == "reject" and suggestion is not None:
            session.reject(suggestion)
            return f"rejected suggestion {target}"
        return None

    return run


def preview_reader(row: OverlayRow, plan: ContextPlan):
    """Reads the row's candidate (or suggestion) in full, for a viewer."""

    def read(session: WorkbenchSession) -> msg.ShowText:
        if row.item is not None:
            item = row.item
            body, language = session.item_content(item, plan)
            return msg.ShowText(f"{item.id} · {item.kind} · {tok(item.tokens)} tok · {item.reason}", body, language)
        assert row.suggestion is not None
        body, language = session.suggestion_content(row.suggestion, plan)
        return msg.ShowText(f"suggested pin {row.suggestion.target} · {row.suggestion.why}", body, language)

    return read
