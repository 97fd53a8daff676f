"""The workbench's side of the session facade: what the screens ask of the engine.

Every method here is synchronous and runs in a Textual thread worker, never on the UI
thread. Engine modules are imported inside the methods so that the first paint never waits
for the planner, the tokenizer or the embedding library.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from ctxbench.config import Config
    from ctxbench.records.messages import Message
    from ctxbench.records.plans import ContextPlan, Pin, PlanItem
    from ctxbench.session import Workbench
    from ctxbench.records.sessions import SessionSettings

from ctxbench.records.vocab import PIN_TARGET_PREFIXES


@dataclass(frozen=True)
class LaunchOptions:
    """What the command line asked for."""

    db_path: Path | None = None
    repo: Path | None = None
    session_id: str | None = None
    mode: str | None = None
    budget: int | None = None
    strategy: str | None = None
    theme: str | None = None
    new_session: bool = False
    title: str = ""
    import_file: Path | None = None  # the demo imports its recorded session into its own database
    import_format: str = "openai"
    index_repo: bool = True  # index the repository and plug retrieval in (off: plans carry no cards)
    retriever: Any = None  # a ready retriever to plug in instead of indexing (tests, benchmarks)
    warm_embedder: bool = True  # load the embedding model in the background for semantic retrieval
    # the model (flags override the config file and CTXBENCH_LLM_* variables, as in `ctxbench chat`)
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key_env: str | None = None
    llm_context_limit: int | None = None
    llm_timeout_s: float | None = None
    llm_from_env: bool = True  # False: ignore CTXBENCH_LLM_* (the demo stays offline unless a flag says otherwise)

    def llm_flags(self) -> dict[str, Any]:
        """The model flags as ``llm.providers.resolve_llm_config`` keywords."""
        return {"base_url": self.llm_base_url, "model": self.llm_model, "api_key_env": self.llm_api_key_env,
                "context_limit": self.llm_context_limit, "timeout_s": self.llm_timeout_s}


@dataclass(frozen=True)
class SessionSnapshot:
    session_id: str
    title: str
    repo: str | None
    settings: "SessionSettings"
    history: tuple["Message", ...]  # active and dropped messages of the active branch, oldest first
    dropped: frozenset[int]
    pins: tuple["Pin", ...]


@dataclass(frozen=True)
class Suggestion:
    """A suggested pin: shown dimmed under the overlay's ``suggested pins`` delimiter."""

    target: str
    label: str
    score: float
    why: str
    content: str = ""


@dataclass(frozen=True)
class PlanView:
    """A plan and what the screens show with it."""

    plan: "ContextPlan"
    settings: "SessionSettings"
    pins: tuple["Pin", ...]
    suggestions: tuple[Suggestion, ...]
    group_id: int | None  # the turn planned (None: a draft that is not stored yet)
    draft: bool = False
    semantic: bool = False

    def pin_for(self, item_id: str) -> "Pin | None":
        if item_id.startswith("pin:"):
            wanted = item_id[4:]
            return next((p for p in self.pins if p.id == wanted), None)
        return next((p for p in self.pins if p.target == item_id), None)


@dataclass
class TurnSink:
    """Callbacks a running turn reports through (each posts a message to the UI)."""

    user_stored: Callable[["Message"], None] = lambda m: None
    planned: Callable[[PlanView], None] = lambda v: None
    text: Callable[[str], None] = lambda s: None
    tool: Callable[["Message"], None] = lambda m: None
    status: Callable[[str], None] = lambda s: None
    usage: Callable[[Any], None] = lambda check: None  # an llm.events.UsageCheck per model call
    state: Callable[[str], None] = lambda block: None  # a new ### STATE block was stored


@dataclass(frozen=True)
class TurnOutcome:
    reply: "Message | None"
    error: str = ""
    cancelled: bool = False


class Bridge:
    """One open session of the workbench."""

    def __init__(self, options: LaunchOptions, config: "Config") -> None:
        self.options = options
        self.config = config
        self.lock = threading.RLock()
        self.workbench: "Workbench | None" = None
        self.session_id = ""
        self.rejected: set[str] = set()  # suggestions the user rejected in this session
        self.semantic_ready = False
        self.retrieval_ready = False
        self.code_context: Any = None  # request_code_context's view of the index (set by the warm-up)
        self.reflection: Any = None  # the last turn's Reflection
        self._applied: dict[str, Any] = {}
        self._runner: Any = None  # one TurnRunner (and its trace store) for the session, closed by close()
        self._traces: Any = None
        self._closed = False

    # -- opening ------------------------------------------------------------------------------
    def open(self) -> SessionSnapshot:
        from ctxbench.session import Workbench

        opts = self.options
        wb = Workbench(db_path=opts.db_path, config=self.config, repo=opts.repo)
        self.workbench = wb
        if opts.session_id:
            wb.session_info(opts.session_id)  # raises UnknownSession
            sid = opts.session_id
        elif opts.import_file is not None:
            sid = wb.import_file(opts.import_file, opts.import_format, title=opts.title or None)
        elif opts.new_session:
            sid = wb.create_session(opts.title, repo=opts.repo)
        else:
            sid = wb.latest_session(repo=opts.repo) or wb.create_session(opts.title, repo=opts.repo)
        self.session_id = sid
        if opts.retriever is not None:
            wb.retriever = opts.retriever
            self.retrieval_ready = True
            self.semantic_ready = bool(getattr(opts.retriever, "semantic_ready", False))
        changes = {k: v for k, v in (("mode", opts.mode), ("budget", opts.budget), ("strategy", opts.strategy))
                   if v is not None}
        if changes:
            wb.update_settings(sid, **changes)
        settings = wb.settings(sid)
        self._applied = {"mode": settings.mode, "budget": settings.budget, "strategy": settings.strategy,
                         "window_groups": settings.window_groups}
        return self.snapshot()

    @property
    def wb(self) -> "Workbench":
        if self.workbench is None:
            raise RuntimeError("the session is not open yet")
        return self.workbench

    @property
    def traces(self) -> Any:
        """The session's ``llm`` tables (model calls, tool traces, pin suggestions): one connection."""
        with self.lock:
            if self._traces is None:
                from ctxbench.llm.traces import TraceStore

                self._traces = TraceStore(self.wb.db_path)
            return self._traces

    @property
    def runner(self) -> Any:
        """The session's TurnRunner, made on first use and kept for every turn and rebuild."""
        with self.lock:
            if self._closed:
                raise RuntimeError("the session is closed")
            if self._runner is None:
                from ctxbench.llm.loop import TurnRunner
                from ctxbench.llm.providers import make_client

                self._runner = TurnRunner(self.wb, make_client(self.config.llm), self.config,
                                          code=self.code_context, traces=self.traces)
            self._runner.code = self.code_context  # the index may have come up since the last turn
            return self._runner

    def close(self) -> None:
        """Close the runner's trace store and the session's store (the app is leaving)."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            if self._runner is not None:
                self._runner.close()
                self._runner = None
            if self._traces is not None:
                self._traces.close()
                self._traces = None
            if self.workbench is not None:
                self.workbench.close()

    def snapshot(self) -> SessionSnapshot:
        wb, sid = self.wb, self.session_id
        info = wb.session_info(sid)
        messages = wb.all_messages(sid)
        dropped = frozenset(m.group_id for m in messages if m.status == "dropped")
        return SessionSnapshot(sid, info.title, info.repo, wb.settings(sid), messages, dropped, wb.pins(sid))

    # -- settings -----------------------------------------------------------------------------
    def sync_settings(self, desired: dict[str, Any]) -> "SessionSettings":
        """Store the settings the UI shows, if they differ from what was stored last."""
        changes = {k: v for k, v in desired.items() if self._applied.get(k) != v}
        if changes:
            self.wb.update_settings(self.session_id, **changes)
            self._applied.update(changes)
        return self.wb.settings(self.session_id)

    # -- plans --------------------------------------------------------------------------------
    def last_user_group(self) -> int | None:
        for m in reversed(self.wb.history(self.session_id)):
            if m.role == "user":
                return m.group_id
        return None

    def tools_tokens(self) -> int:
        """Tokens of the tool definitions the next turn's first call offers (the runner's, once it
        exists; without one, the configured tools), so the live plan budgets what will be sent."""
        with self.lock:
            if self._runner is not None:
                return self._runner.tools_tokens(0)
        from ctxbench.llm.tools import offered_tools, tools_tokens

        return tools_tokens(offered_tools(self.config.llm, 0), self.wb.tokenizer)

    def plan(self, draft: str = "", *, store: bool = False, group_id: int | None = None) -> PlanView:
        """The current plan: for ``draft`` (the next turn) if given, else for the latest turn."""
        wb, sid = self.wb, self.session_id
        tools = self.tools_tokens()  # the meter shows the whole prompt the next call sends
        if draft.strip():
            plan = wb.plan(sid, draft, store=store, tools_tokens=tools)
            group, is_draft = None, True
        else:
            group = group_id if group_id is not None else self.last_user_group()
            plan = wb.plan(sid, None if group is not None else "", current_group=group, store=store,
                           tools_tokens=tools)
            is_draft = False
        return self.view_of(plan, group, draft=is_draft)

    def view_of(self, plan: "ContextPlan", group_id: int | None, *, draft: bool = False) -> PlanView:
        wb, sid = self.wb, self.session_id
        pins = wb.pins(sid)
        return PlanView(plan, wb.settings(sid), pins, self.suggestions(plan, pins), group_id, draft,
                        self.semantic_ready)

    def suggestions(self, plan: "ContextPlan", pins: tuple["Pin", ...]) -> tuple[Suggestion, ...]:
        """Items worth pinning: the model's own (``suggest_pins``, open until the user decides) first,
        then high activation; with neither, the best-scored symbol cards that are not pinned."""
        from ctxbench.llm.suggestions import open_suggestions

        pinned = {p.target for p in pins}
        cfg = self.config.planner.activation
        labels = labels_of(plan)
        found: list[Suggestion] = []
        for s in open_suggestions(self.wb, self.session_id, self.traces):
            why = f"{s.source}: {s.reason}" if s.reason and s.source == "model" else (s.reason or s.source)
            label = labels.get(s.target) or s.target.replace(":", " ", 1)  # card:x -> "card x", as plans say
            found.append(Suggestion(s.target, label, float(s.score), why))
        if not found:
            cards = sorted((i for i in plan.items if i.kind == "symbol_card" and i.id not in pinned),
                           key=lambda i: (-i.score, i.id))
            found = [Suggestion(i.id, i.label, i.score, "retrieval score") for i in cards]
        found = [s for s in found if s.target not in pinned and s.target not in self.rejected]
        return tuple(found[: cfg.max_suggestions])

    # -- pins and drops -----------------------------------------------------------------------
    def item_content(self, item: "PlanItem", plan: "ContextPlan") -> tuple[str, str]:
        """The full text of a plan item and a language for highlighting."""
        if item.id.startswith("card:"):
            card = self.card_text(item.id[5:], plan)
            if card:
                return card, "python"
        if item.messages:
            return render_messages(item.messages), "text"
        wb, sid = self.wb, self.session_id
        if item.id.startswith("group:") or item.id.startswith("atom:"):
            parts = item.id.split(":")
            try:
                messages = wb.group(sid, int(parts[1]))
            except Exception as exc:  # noqa: BLE001 - shown to the user
                return f"cannot read {item.id}: {exc}", "text"
            if item.id.startswith("atom:") and len(parts) > 2:
                wanted = {int(x) for x in parts[2:] if x.isdigit()} | set(item.message_ids)
                messages = tuple(m for m in messages if m.id in wanted) or messages
            return render_messages([m.to_openai() for m in messages]), "text"
        pin = next((p for p in wb.pins(sid) if p.target == item.id or f"pin:{p.id}" == item.id), None)
        if pin is not None and pin.content:
            return pin.content, "python" if pin.target.startswith("card:") else "text"
        return item.detail or item.label, "text"

    def card_text(self, symbol: str, plan: "ContextPlan") -> str:
        retrieval = self.wb.get_retrieval_set(plan.retrieval_set_id) if plan.retrieval_set_id else None
        if retrieval is None and self.wb.retriever is not None:
            retrieval = self.wb.retriever.retrieve(plan.query, mode=plan.mode)
        if retrieval is not None:
            for hit in retrieval.hits:
                if hit.symbol == symbol:
                    return hit.excerpt or hit.card_text
        return ""

    def pin_item(self, item_id: str, kind: str, *, scope: str = "turn", label: str = "",
                 plan: "ContextPlan | None" = None) -> "Pin":
        content = ""
        if item_id.startswith("card:") and plan is not None:
            content = self.card_text(item_id[5:], plan)
        if item_id.startswith("path:"):  # a file the model suggested: pinned with its text
            body = self.code_context.expand(item_id) if self.code_context is not None else None
            if not body:
                raise ValueError(f"cannot read {item_id[5:]} (no code index, or not a file of the repository)")
            content = body
        target = item_id
        if item_id.startswith("pin:"):
            existing = next((p for p in self.wb.pins(self.session_id) if p.id == item_id[4:]), None)
            if existing is None:
                raise ValueError(f"no pin {item_id[4:]}")
            return self.wb.update_pin(self.session_id, existing.id, kind=kind, scope=scope,
                                      **({"ttl": self._ttl(scope)} if kind == "leased" else {}))
        if not target.startswith(PIN_TARGET_PREFIXES):
            raise ValueError(f"{item_id} cannot be pinned")
        return self.wb.add_pin(self.session_id, target, kind, scope=scope, label=label or target, content=content)

    def _ttl(self, scope: str) -> int:
        pins = self.config.planner.pins
        return pins.task_lease_ttl if scope == "task" else pins.default_lease_ttl

    def unpin(self, item_id: str) -> bool:
        for pin in self.wb.pins(self.session_id):
            if pin.target == item_id or f"pin:{pin.id}" == item_id or pin.id == item_id:
                self.wb.remove_pin(self.session_id, pin.id)
                return True
        return False

    def drop(self, item_id: str) -> str:
        """Leave an item out of the context; returns what was done, for the status line."""
        if item_id.startswith(("group:", "atom:")):
            gid = int(item_id.split(":")[1])
            self.wb.drop_group(self.session_id, gid)
            return f"dropped turn {gid}"
        if self.unpin(item_id):
            return f"unpinned {item_id}"
        if item_id.startswith("card:"):
            self.rejected.add(item_id)
            return f"{item_id} will not be suggested again (cards come and go with the mode and the query)"
        raise ValueError(f"{item_id} is mandatory or not a turn; it cannot be dropped")

    def accept(self, suggestion: Suggestion, plan: "ContextPlan | None") -> "Pin":
        pin = self.pin_item(suggestion.target, "sticky", label=suggestion.label, plan=plan)
        self._decide(suggestion.target, accepted=True)
        return pin

    def reject(self, suggestion: Suggestion) -> None:
        self.rejected.add(suggestion.target)
        self._decide(suggestion.target, accepted=False)

    def _decide(self, target: str, *, accepted: bool) -> None:
        """Record the user's answer, so a model's suggestion is not raised again in a later run."""
        source = next((s.source for s in self.traces.suggestions(self.session_id) if s.target == target),
                      "activation")
        self.traces.add_suggestion(self.session_id, target, "", source, "")
        self.traces.decide_suggestion(self.session_id, target, accepted=accepted)

    # -- turns ----------------------------------------------------------------------------------
    def run_turn(self, text: str, sink: TurnSink, cancel: Any) -> TurnOutcome:
        from ctxbench.tui.turns import run_turn

        return run_turn(self, text, sink, cancel)

    def rebuild_state(self, sink: TurnSink, cancel: Any) -> TurnOutcome:
        from ctxbench.tui.turns import rebuild_state

        return rebuild_state(self, sink, cancel)

    # -- replay ---------------------------------------------------------------------------------
    def replay_turns(self) -> list["Message"]:
        """The first user message of each turn of the session, oldest first."""
        from ctxbench.llm.replay import user_turns

        return user_turns(self.wb.history(self.session_id))

    def replay_step(self, turn: int, settings: dict[str, Any]) -> Any:
        """The plan turn ``turn`` (1-based) would get under ``settings`` (mode, budget, strategy,
        window_groups): an ``llm.replay.ReplayStep``, or None when there is no such turn."""
        from ctxbench.llm.replay import replay

        wanted = {k: settings.get(k) for k in ("mode", "budget", "strategy", "window_groups")}
        return next(replay(self.wb, self.session_id, only_turn=turn, **wanted), None)

    # -- retrieval ------------------------------------------------------------------------------
    def prepare_retrieval(self, status: Callable[..., None], **kwargs: Any) -> bool:
        from ctxbench.tui.warmup import prepare_retrieval

        return prepare_retrieval(self, status, **kwargs)


def labels_of(plan: "ContextPlan") -> dict[str, str]:
    return {i.id: i.label for i in plan.items}


def render_messages(messages) -> str:
    """OpenAI-style messages as readable text: a header per message, then its content."""
    out: list[str] = []
    for n, m in enumerate(messages, 1):
        head = f"── {n} · {m.get('role', '?')}"
        if m.get("tool_call_id"):
            head += f" · answers {m['tool_call_id']}"
        out.append(head + " " + "─" * max(3, 60 - len(head)))
        if m.get("content"):
            out.append(str(m["content"]))
        for call in m.get("tool_calls") or ():
            fn = call.get("function", {})
            out.append(f"⚙ {fn.get('name')}({fn.get('arguments')})  [{call.get('id')}]")
        out.append("")
    return "\n".join(out)

