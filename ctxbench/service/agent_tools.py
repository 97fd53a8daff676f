"""The planner as tools for another agent (``ctxbench mcp``): plan context, retrieve code, pin, unpin.

:class:`AgentTools` is one session of a workbench over a repository, opened and indexed on first use (an
agent's first call waits for indexing; ``ctxbench mcp`` answers the protocol's handshake at once). Every
tool answers with text an agent reads as it is: compact, each item with its tokens and the reason it is
in (or out of) the plan. Plans are stored in the session, like the workbench's.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

from ctxbench.config import MAX_TOKENS, Config
from ctxbench.records.plan_request import PlanRequest
from ctxbench.records.plans import ContextPlan, PlanItem
from ctxbench.records.vocab import PIN_KINDS, PIN_TARGET_PREFIXES
from ctxbench.service.options import LaunchOptions
from ctxbench.service.session import WorkbenchSession

MCP_SESSION_TITLE = "mcp: {name}"


class AgentTools:
    """What the MCP server's tools do, over one workbench session."""

    def __init__(self, config: Config, *, db_path: Path | None, repo: Path | None, session_id: str | None = None,
                 semantic: bool = False, progress: Callable[[str], None] = lambda text: None) -> None:
        self.config = config
        self.repo = repo
        self.semantic = semantic
        self.progress = progress
        self._options = LaunchOptions(db_path=db_path, repo=repo, session_id=session_id,
                                      title=MCP_SESSION_TITLE.format(name=repo.name if repo else "no repository"),
                                      warm_embedder=semantic)
        self._session: WorkbenchSession | None = None
        self._lock = threading.Lock()
        self.last_plan: ContextPlan | None = None

    # -- opening --------------------------------------------------------------------------------------------
    @property
    def session(self) -> WorkbenchSession:
        """The session, opened (and its repository indexed) on first use."""
        with self._lock:
            if self._session is None:
                session = WorkbenchSession(self._options, self.config)
                session.open()
                session.attach_repository(lambda p: self.progress(p.text))
                self._session = session
            return self._session

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()

    # -- the tools ------------------------------------------------------------------------------------------
    def plan_context(self, query: str, mode: str | None = None, budget: int | None = None) -> str:
        if not query.strip():
            raise ValueError("query is empty")
        session = self.session
        if mode is not None and mode not in self.config.planner.mode_names:
            raise ValueError(f"unknown mode {mode!r}; one of {', '.join(self.config.planner.mode_names)}")
        if budget is not None and not 1 <= budget <= MAX_TOKENS:
            raise ValueError(f"budget must be between 1 and {MAX_TOKENS:,} tokens")
        settings = session.stored_settings().with_choices(mode=mode, budget=budget)
        plan = session.wb.planning.plan(PlanRequest(session.session_id, query, settings, store=True))
        self.last_plan = plan
        return render_plan(plan, self.config.mcp.card_chars)

    def retrieve_code(self, query: str, k: int | None = None) -> str:
        if not query.strip():
            raise ValueError("query is empty")
        k = self.config.mcp.default_k if k is None else k
        if not 1 <= k <= self.config.mcp.max_k:
            raise ValueError(f"k must be between 1 and {self.config.mcp.max_k}")
        session = self.session
        if session.attached is None:
            raise ValueError("no repository is indexed (start ctxbench mcp with --repo PATH)")
        found = session.attached.retriever.retrieve(query, k)
        if not found.hits:
            return "no hits"
        out = []
        for rank, hit in enumerate(found.hits[:k], 1):
            out.append(f"{rank}. {hit.symbol}  {hit.path}:{hit.line}  score {hit.score:.3f}  ({hit.why})")
            out.append(_cut(hit.card_text, self.config.mcp.card_chars))
        return "\n".join(out)

    def pin(self, target: str, kind: str = "sticky") -> str:
        if kind not in PIN_KINDS:
            raise ValueError(f"kind must be one of {', '.join(PIN_KINDS)}")
        if not target.startswith(PIN_TARGET_PREFIXES):
            raise ValueError(f"target must start with one of {', '.join(PIN_TARGET_PREFIXES)}")
        limit = self.config.mcp.max_text_pin_chars
        if target.startswith("text:") and len(target) - len("text:") > limit:
            raise ValueError(f"a text: pin holds at most {limit:,} characters (mcp.max_text_pin_chars), this one "
                             f"{len(target) - len('text:'):,}: it would be sent in every later plan")
        session = self.session
        pin = session.pin_item(target, kind, scope="task" if kind == "leased" else "turn", plan=self.last_plan)
        return f"pinned {pin.target} ({pin.kind}); the next plans keep it"

    def unpin(self, target: str) -> str:
        if self.session.unpin(target):
            return f"unpinned {target}"
        return f"{target} was not pinned"

    def current_plan(self) -> str:
        """The last plan of the session as JSON (the one plan_context made, else the session's newest)."""
        plan = self.last_plan
        if plan is None:
            session = self.session
            stored = session.wb.plans.list(session.session_id, limit=1)
            if not stored:
                return json.dumps({"plan": None, "note": "no plan yet: call plan_context"})
            plan = session.wb.plans.get(stored[0].plan_id)
        return json.dumps(plan.to_json(), ensure_ascii=False)


def over_budget_line(plan: ContextPlan) -> str:
    """The first line of an over-budget plan's answer (the tool call is an error an agent sees as one)."""
    reason = plan.over_budget_reason or f"the plan needs {plan.used_tokens:,} tokens, the budget is {plan.budget:,}"
    return f"over budget: {reason}; raise the budget (budget=N) or unpin something"


def render_plan(plan: ContextPlan, card_chars: int) -> str:
    """A plan as an agent reads it: the included cards with their text, the history and the rest, each with
    tokens and reason; then what was left out and why."""
    lines = [f"plan {plan.plan_id} · mode {plan.mode} · {plan.used_tokens:,} of {plan.budget:,} tokens"
             + (" · OVER BUDGET" if plan.over_budget else "")]
    shown = (("pinned", ("pin",)), ("code", ("symbol_card",)), ("orientation", ("scaffold",)))
    for title, kinds in shown:
        items = [i for i in plan.included if i.kind in kinds]
        if items:
            lines.append(f"## {title}")
            for item in items:
                lines.append(f"### {item.id} ({item.tokens} tok, {item.reason})")
                lines.append(_cut(_text(item), card_chars))
    listed = {k for _, kinds in shown for k in kinds} | {"system_prompt", "current_turn"}
    other = [i for i in plan.included if i.kind not in listed]
    if other:
        lines.append("## other context")
        lines.extend(f"- {i.id}: {i.label} ({i.tokens} tok, {i.reason}{', ' + i.detail if i.detail else ''})"
                     for i in other)
    if plan.excluded:
        lines.append("## left out")
        lines.extend(f"- {i.id}: {i.label} ({i.tokens} tok, {i.reason})" for i in plan.excluded)
    return "\n".join(lines)


def _text(item: PlanItem) -> str:
    return "\n".join(str(m.get("content") or "") for m in item.messages) or item.label


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit:,} more characters)"


def tool_schema_tokens(tools: list[dict[str, Any]], count: Callable[[str], int]) -> list[tuple[str, int]]:
    """Tokens of each tool as an agent's model receives it: its name, description and input schema as JSON."""
    return [(t["name"], count(json.dumps(t, ensure_ascii=False, separators=(",", ":")))) for t in tools]
