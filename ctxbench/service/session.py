"""One open session of the workbench: what the screens (and the demo's ``--no-tui``) ask of the engine.

Every method is synchronous and meant for a worker thread, never a UI thread. Results are frozen
records (``records.views``); a turn is a generator of typed events (``records.turns``, with each plan
the turn makes as a :class:`~ctxbench.records.turns.TurnPlanned` carrying its :class:`PlanView`), so a
front end renders what arrives and never reaches into the engine.

Settings are values: a front end holds the :class:`~ctxbench.records.sessions.SessionSettings` it shows
and passes it to :meth:`WorkbenchSession.plan`; the session checks a new value once, stores it when it
differs from the stored one, and plans with it as given (nothing is read back).
"""
from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Callable, Iterator

from ctxbench.config import Config
from ctxbench.llm.client import CancelToken
from ctxbench.llm.loop import TurnRunner
from ctxbench.records.errors import NotFound
from ctxbench.records.messages import Message
from ctxbench.records.plan_request import NEXT_TURN, PlanRequest, StoredTurn
from ctxbench.records.plans import ContextPlan, Pin, PlanItem
from ctxbench.records.retrieval import RetrievalHit
from ctxbench.records.sessions import SETTING_NAMES, SessionSettings
from ctxbench.records.turns import PlanReady, ReflectionDone, TurnEvent, TurnPlanned, TurnStarted
from ctxbench.records.views import PlanView, Progress, ReplayPage, SessionSnapshot, Suggestion
from ctxbench.records.vocab import EMBEDDING_STRATEGIES, PIN_TARGET_PREFIXES
from ctxbench.service.attach import AttachedRepository, attach_repository
from ctxbench.service.compaction import Compactor
from ctxbench.service.model import make_runner, offered_tools_tokens
from ctxbench.service import phase_log
from ctxbench.service.options import LaunchOptions
from ctxbench.service.plan_suggestions import plan_suggestions
from ctxbench.service.text import render_messages
from ctxbench.service.timeline import Timeline
from ctxbench.service.store_users import StoreUsers, quietly, uses_store
from ctxbench.service.workbench import Workbench
from ctxbench.records.item_refs import AtomRef, CapsuleRef, CardRef, ItemRef, PathRef, PinRef, SummaryRef, card_symbol

__all__ = ["CancelToken", "WorkbenchSession"]

SessionEvent = TurnEvent | TurnPlanned
StatusSink = Callable[[Progress], None]


class WorkbenchSession:
    """One session of the workbench, opened by :meth:`open`."""

    def __init__(self, options: LaunchOptions, config: Config) -> None:
        self.options = options
        self.config = config
        self.workbench: Workbench | None = None
        self.session_id = ""
        self.settings: SessionSettings | None = None  # as stored
        self.rejected: set[str] = set()  # suggestions the user rejected in this session
        self.attached: AttachedRepository | None = None
        self.timeline: Timeline | None = None  # set by open()
        self.compaction: Compactor | None = None  # set by open(): summaries, the auto-compact threshold, tasks
        self.reflection = None  # the last turn's Reflection
        self._lock = threading.RLock()  # settings writes and the runner's creation
        self._runner: TurnRunner | None = None
        self._closed = False
        self._status: StatusSink | None = None  # where background work reports (set by attach_repository)
        self._warming = threading.Lock()  # one history warm-up at a time
        self.store_users = StoreUsers()  # warm-ups, plans in other threads: close() waits; a key holds warm-ups
        self._embedder = None  # the warm-up's embedding model, loading from start_embedder() on
        self.notice = ""  # what open() settled (a turn that ended with its process mid-turn), said once

    # -- opening and closing ----------------------------------------------------------------------------
    def open(self) -> SessionSnapshot:
        opts = self.options
        from ctxbench.service.demo_seed import plant_seed

        seeded = plant_seed(opts.seed_db, opts.db_path)  # the session imported and the index built by an earlier run
        wb = Workbench(db_path=opts.db_path, config=self.config, repo=opts.repo)
        self.workbench = wb
        if opts.kept_vectors is not None and opts.kept_vectors.is_file() and not seeded:
            wb.vectors.copy_in(opts.kept_vectors)  # before anything embeds: the warm-up finds them cached
        if opts.session_id:
            wb.sessions.info(opts.session_id)  # raises UnknownSession
            sid = opts.session_id
        elif opts.import_file is not None and not seeded:
            sid = wb.import_file(opts.import_file, opts.import_format, title=opts.title or None)
        else:
            repo = str(wb.repo) if wb.repo else None
            sid = (None if opts.new_session else wb.sessions.latest(repo)) or wb.sessions.create(opts.title, repo)
        self.session_id = sid
        self.notice = wb.recover_turn(sid) or ""  # a turn that ended with its process mid-turn, settled
        self.timeline = Timeline(wb, sid)
        self.compaction = Compactor(wb, self.config)
        if opts.retriever is not None:
            wb.retriever = opts.retriever
        changes = {k: v for k, v in (("mode", opts.mode), ("budget", opts.budget), ("strategy", opts.strategy))
                   if v is not None}
        self.settings = wb.update_settings(sid, **changes) if changes else wb.settings(sid)
        return self.snapshot()

    @property
    def wb(self) -> Workbench:
        if self.workbench is None:
            raise RuntimeError("the session is not open yet")
        return self.workbench

    def snapshot(self) -> SessionSnapshot:
        wb, sid = self.wb, self.session_id
        info = wb.sessions.info(sid)
        messages = wb.messages.all(sid)
        dropped = frozenset(m.group_id for m in messages if m.status == "dropped")
        task = wb.tasks.current(sid)
        return SessionSnapshot(sid, info.title, info.repo, self.stored_settings(), messages, dropped, wb.pins.list(sid),
                               wb.branches.active(sid).name, task.name if task is not None else "",
                               self.notice)

    def stored_settings(self) -> SessionSettings:
        if self.settings is None:
            self.settings = self.wb.settings(self.session_id)
        return self.settings

    def settle(self) -> None:
        """What was just loaded lives as long as the session: collect once, then keep it out of the
        collector's way, so full collections do not pause plans (``ctxbench.heap``)."""
        from ctxbench.heap import settle

        settle()

    def close(self) -> None:
        """Close the session's store (the front end is leaving) once the work on it has ended (``store_users``)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._runner = None
        self.store_users.close()
        with self._lock:
            if self.workbench is not None:
                self.workbench.close()

    # -- code retrieval -----------------------------------------------------------------------------------
    @uses_store
    def attach_repository(self, status: StatusSink, *, on_keyword_ready: Callable[[], None] = lambda: None,
                          on_semantic_ready: Callable[[], None] = lambda: None) -> None:
        """Index the session's repository and plug its retrieval in (plans get cards from then on), then warm
        the embedding model and build the vector index (plans get semantic search). Progress through
        ``status`` in the ``index`` and ``embedder`` slots; a model that cannot load turns semantic off. Raises
        ``store_users.SessionClosing`` when the session closes meanwhile."""
        wb, opts = self.wb, self.options
        self._status = status
        if wb.repo is None or not opts.index_repo or opts.retriever is not None:
            return
        from ctxbench.records.errors import EmbedderError

        def indexing(phase: str, done: int, total: int) -> None:
            status(Progress("index", f"indexing: {phase}", fraction=(done / total) if total else None))

        status(Progress("index", "indexing…"))
        attached = attach_repository(wb, wb.repo, self.store_users.checked(indexing), semantic=False)
        self.attached = attached
        phase_log.mark("code index")
        status(Progress("index", f"{attached.files} files · {attached.symbols} symbols", "ready"))
        on_keyword_ready()
        embedder = self.start_embedder()
        if embedder is None:
            return
        status(Progress("embedder", "embedder warming…"))

        def embedding(done: int, total: int) -> None:
            status(Progress("embedder", "embedding", fraction=(done / total) if total else None))

        try:
            attached.warm_semantic(wb, embedder, self.store_users.checked(embedding))
        except EmbedderError as exc:  # a failed load (bad weights, missing model): keyword + graph carry on
            status(Progress("embedder", f"semantic search off: {exc}", "error"))
            return
        phase_log.mark("vector index")
        self.warm_history()  # what the session's strategy compares (fused: messages, semantic: turns), before plans
        phase_log.mark("history vectors")
        status(Progress("embedder", "semantic ready", "ready"))
        phase_log.mark("semantic ready")
        on_semantic_ready()

    def start_embedder(self):
        """The embedding model the warm-up will use, loading in its own thread from the first call on (the front end
        calls this as the session starts opening, so the load runs beside the opening, the first plan and the indexing
        instead of after them); None when there is nothing to warm (no repository to index, or ``warm_embedder`` off)."""
        opts = self.options
        if not (opts.warm_embedder and opts.index_repo and opts.retriever is None and opts.repo is not None):
            return None
        with self._lock:
            if self._embedder is None:
                from ctxbench.retrieval.embedder import Embedder

                self._embedder = (opts.embedder_factory or Embedder)(self.config.embedding)
                self._embedder.start_loading()
            return self._embedder

    @uses_store
    def warm_history(self) -> int:
        """Embed what the session's strategy compares with a query and has no vector yet (in the calling thread),
        with progress in the ``embedder`` slot; returns how many texts were embedded (0 without a ready model)."""
        status, sid = self._status, self.session_id
        if not sid or self.wb.history.embedder() is None:
            return 0

        def history(done: int, total: int) -> None:
            if status is not None and total:
                status(Progress("embedder", f"embedding history {done}/{total}", fraction=done / total))

        with self._warming:
            embedded = self.wb.history.warm(sid, self.store_users.checked(history))
        if embedded and status is not None:
            status(Progress("embedder", "semantic ready", "ready"))
        return embedded

    @property
    def retrieval_ready(self) -> bool:
        return self.wb.retriever is not None

    @property
    def semantic_ready(self) -> bool:
        retriever = self.wb.retriever
        return bool(getattr(retriever, "semantic_ready", False))

    # -- plans --------------------------------------------------------------------------------------------
    def check_settings(self, settings: SessionSettings) -> SessionSettings:
        return self.wb.rules.check(settings)

    def use_settings(self, settings: SessionSettings) -> SessionSettings:
        """Make ``settings`` the session's: checked, and stored when it differs from what is stored."""
        with self._lock:
            stored = self.stored_settings()
            if settings == stored:
                return stored
            self.wb.rules.check(settings)
            changes = {name: getattr(settings, name) for name in SETTING_NAMES
                       if getattr(settings, name) != getattr(stored, name)}
            self.settings = self.wb.update_settings(self.session_id, **changes)
        if changes.get("strategy") in EMBEDDING_STRATEGIES and self.wb.history.embedder() is not None:
            # the new strategy compares other texts (turns, messages): embed those still missing, in the background
            self._warm_in_background()
        return self.settings

    def _warm_in_background(self) -> None:
        threading.Thread(target=quietly(self.warm_history), name="ctxbench-warm-history", daemon=True).start()

    def _warm_what_is_pending(self) -> None:
        """A plan embeds only a few missing texts itself: when the last one left some (a history that grew by more
        than that, a transcript whose texts all changed), the warm-up embeds the rest in the background."""
        if self.wb.history.pending(self.session_id) > 0 and not self._warming.locked():
            self._warm_in_background()

    def tools_tokens(self) -> int:
        """Tokens of the tool definitions the next turn's first call offers, so the live plan budgets them."""
        return offered_tools_tokens(self.config, self.wb.tokenizer)

    @uses_store
    def plan(self, draft: str = "", settings: SessionSettings | None = None, *, store: bool = False,
             group_id: int | None = None) -> PlanView:
        """The current plan under ``settings`` (default: the stored ones; a new value is stored first): for
        ``draft`` (the next turn) if given, else for the latest turn."""
        wb, sid = self.wb, self.session_id
        settings = self.use_settings(settings) if settings is not None else self.stored_settings()
        tools = self.tools_tokens()  # the meter shows the whole prompt the next call sends
        if draft.strip():
            plan = wb.planning.plan(PlanRequest(sid, draft, settings, tools_tokens=tools, store=store))
            self._warm_what_is_pending()
            return self.view_of(plan, None, draft=True)
        group = group_id if group_id is not None else self.last_user_group()
        plan = wb.planning.plan(self._turn_request(group, settings, tools, store))
        self._warm_what_is_pending()
        return self.view_of(plan, group)

    def _turn_request(self, group: int | None, settings: SessionSettings, tools: int, store: bool) -> PlanRequest:
        """The plan of turn ``group`` (None: the next turn, no draft)."""
        turn = StoredTurn(group) if group is not None else NEXT_TURN
        return PlanRequest(self.session_id, None if group is not None else "", settings, turn, tools, store=store)

    @uses_store
    def recall_stored(self) -> int:
        """The store remembers what the latest turn's plan (shown first) shares with the session's stored plans
        (``Planning.recall``), so the next turn's plan is stored as fast as any later one; how many chunks."""
        request = self._turn_request(self.last_user_group(), self.stored_settings(), self.tools_tokens(), False)
        return self.wb.planning.recall(request)

    def last_user_group(self) -> int | None:
        for m in reversed(self.wb.visible_messages(self.session_id)):  # the kept view: no read of the session
            if m.role == "user" and m.status == "active":
                return m.group_id
        return None

    def view_of(self, plan: ContextPlan, group_id: int | None, *, draft: bool = False) -> PlanView:
        pins = self.wb.pins.list(self.session_id)
        diff = self.timeline.previous_turn_diff(plan, group_id) if self.timeline is not None else None
        warning = self.compaction.pressure(self.session_id, plan).line if self.compaction is not None else ""
        task = self.wb.tasks.current(self.session_id)
        return PlanView(plan, self.stored_settings(), pins, self.suggestions(plan, pins), group_id, draft, diff,
                        warning, task.name if task is not None else "")

    def suggestions(self, plan: ContextPlan, pins: tuple[Pin, ...]) -> tuple[Suggestion, ...]:
        """The pins worth suggesting beside ``plan`` (``plan_suggestions``), none the user rejected here."""
        return plan_suggestions(self.wb, self.session_id, plan, pins, self.rejected)

    # -- what an item holds -------------------------------------------------------------------------------
    def item_content(self, item: PlanItem, plan: ContextPlan) -> tuple[str, str]:
        """The full text of a plan item and a language for highlighting."""
        ref = ItemRef.parse(item.id)
        if isinstance(ref, CardRef):
            return self.card_preview(item, plan), "text"
        if isinstance(ref, CapsuleRef):  # in full: source, files, hashes, staleness
            from ctxbench.service.capsules import capsule_view

            try:
                return capsule_view(self.wb.capsules.get(ref.capsule_id)), "text"
            except NotFound:
                return f"capsule c{ref.capsule_id} is no longer stored (its module left the index)", "text"
        if item.messages:
            return render_messages(item.messages), "text"
        wb, sid = self.wb, self.session_id
        if isinstance(ref, SummaryRef):
            summary = wb.summaries.get(sid, ref.summary_id)
            return f"summary s{summary.id} of {summary.span} ({summary.source})\n\n{summary.text}", "text"
        if ref.group_id is not None:
            try:
                messages = wb.messages.group(sid, ref.group_id)
            except Exception as exc:  # noqa: BLE001 - shown to the user
                return f"cannot read {item.id}: {exc}", "text"
            if isinstance(ref, AtomRef) and ref.part is not None:
                first = ref.message_id
                wanted = ({first} if first is not None else set()) | set(item.message_ids)
                messages = tuple(m for m in messages if m.id in wanted) or messages
            return render_messages([m.to_openai() for m in messages]), "text"
        pin = next((p for p in wb.pins.list(sid) if p.target == item.id or str(PinRef(p.id)) == item.id), None)
        if pin is not None and pin.content:
            return pin.content, "python" if card_symbol(pin.target) is not None else "text"
        return item.detail or item.label, "text"

    def card_preview(self, item: PlanItem, plan: ContextPlan) -> str:
        """A card as the plan sends it (or, left out, as its mode would: Light the thin card, Heavy the head and an
        excerpt whose lines carry their file numbers), then the symbol's lines numbered as in its file."""
        symbol = card_symbol(item.id) or item.id
        heavy = bool(plan.mode) and self.config.planner.mode(plan.mode).excerpts  # "": a proxied plan's, no mode
        hit = self.card_hit(symbol, plan)
        if heavy and hit is not None and hit.excerpt:
            lines = hit.excerpt_lines
            shape = (f"the card's head and an excerpt (lines {lines[0]}–{lines[1]})" if lines[0] else
                     "the card's head and an excerpt") + " chosen for the question"
        else:
            shape = "the thin card (signature, doc comment, the first lines of the body)"
        mode = plan.mode.capitalize()
        if item.included and item.messages:
            head, sent = f"sent in this plan ({mode}: {shape}):", "\n".join(str(m.get("content") or "")
                                                                        for m in item.messages)
        else:
            head, sent = f"not sent in this plan ({item.reason}); {mode} would send {shape}:", self.card_text(symbol, plan)
        parts = [head, "", sent or "(no card text: the index does not know this symbol)"]
        source = self.attached.code.source_lines(symbol, self.config.ui.preview_source_lines) \
            if self.attached is not None else None
        if source is not None:
            path, first, lines = source
            width = len(str(first + len(lines) - 1))
            parts += ["", f"{path}, lines {first}–{first + len(lines) - 1} as in the file:", ""]
            parts += [f"{first + n:>{width}}  {line}" for n, line in enumerate(lines)]
        return "\n".join(parts)

    def suggestion_content(self, suggestion: Suggestion, plan: ContextPlan | None) -> tuple[str, str]:
        """What a suggested pin would pin, and a language for highlighting."""
        symbol = card_symbol(suggestion.target)
        if symbol is not None and plan is not None:
            card = self.card_text(symbol, plan)
            if card:
                return card, "text"
        return suggestion.content or suggestion.label, "text"

    def card_hit(self, symbol: str, plan: ContextPlan) -> RetrievalHit | None:
        """The retrieval hit of ``symbol`` behind ``plan`` (its stored RetrievalSet, or the same query asked again)."""
        wb = self.wb
        retrieval = wb.plans.retrieval_set(plan.retrieval_set_id) if plan.retrieval_set_id else None
        if retrieval is None and wb.retriever is not None:
            retrieval = wb.retriever.retrieve(plan.query, mode=plan.mode, budget=plan.budget, pins=(),
                                              activation={}, mentioned=())
        return next((h for h in retrieval.hits if h.symbol == symbol), None) if retrieval is not None else None

    def card_text(self, symbol: str, plan: ContextPlan | None) -> str:
        """The card of ``symbol`` as ``plan``'s mode sends it (thin, or Heavy's head and excerpt): from the plan's
        retrieval, else from the code index; "" when neither knows the symbol."""
        from ctxbench.planner.render import card_text

        excerpts = bool(plan.mode) and self.config.planner.mode(plan.mode).excerpts if plan is not None else False
        hit = self.card_hit(symbol, plan) if plan is not None else None
        if hit is not None:
            return card_text(hit, excerpts)
        index = self.attached.index if self.attached is not None else None
        card = index.cards.get(symbol) if index is not None else None
        return card.render(with_excerpt=excerpts) if card is not None else ""

    def group(self, group_id: int) -> tuple[Message, ...]:
        return self.wb.messages.group(self.session_id, group_id)

    def all_messages(self) -> tuple[Message, ...]:
        return self.wb.messages.all(self.session_id)

    def pins(self) -> tuple[Pin, ...]:
        return self.wb.pins.list(self.session_id)

    # -- pins, drops and the history ----------------------------------------------------------------------
    def pin_item(self, item_id: str, kind: str, *, scope: str = "turn", label: str = "",
                 plan: ContextPlan | None = None, suggested: bool = False) -> Pin:
        """Pin ``item_id``; a target that names nothing is refused (ValueError, nothing stored). Without a code
        index yet, a card or file is known when the plan shows it, or (``suggested``) when the user accepts
        a suggestion of it; with one, the index decides."""
        wb, sid = self.wb, self.session_id
        ref = ItemRef.parse(item_id)
        if isinstance(ref, PinRef):
            existing = next((p for p in wb.pins.list(sid) if p.id == ref.pin_id), None)
            if existing is None:
                raise ValueError(f"no pin {ref.pin_id}")
            return wb.pins.update(sid, existing.id, kind=kind, scope=scope,
                                  **({"ttl": self._ttl(scope)} if kind == "leased" else {}))
        if not item_id.startswith(PIN_TARGET_PREFIXES):
            raise ValueError(f"{item_id} cannot be pinned")
        from ctxbench.service.pin_targets import check_pin_target

        index = self.attached.index if self.attached is not None else None
        shown = [i.id for i in plan.items] if plan is not None else []
        if suggested and index is None:
            shown.append(item_id)
        check_pin_target(wb, sid, item_id, index, shown=shown)
        content = ""
        if isinstance(ref, CardRef):  # the pin keeps the card's text: it is sent as pinned, whatever retrieval finds
            content = self.card_text(ref.symbol, plan)
        if isinstance(ref, PathRef):  # a file the model suggested: pinned with its text
            body = self.attached.code.expand(item_id) if self.attached is not None else None
            if not body:
                raise ValueError(f"cannot read {ref.path} (no code index, or not a file of the repository)")
            content = body
        return wb.pins.add(sid, item_id, kind, scope=scope, label=label or item_id, content=content)

    def pin_text(self, text: str, label: str) -> Pin:
        return self.wb.pins.add(self.session_id, f"text:{label}", "sticky", label=label, content=text)

    def _ttl(self, scope: str) -> int:
        pins = self.config.planner.pins
        return pins.task_lease_ttl if scope == "task" else pins.default_lease_ttl

    def unpin(self, item_id: str) -> bool:
        for pin in self.wb.pins.list(self.session_id):
            if pin.target == item_id or str(PinRef(pin.id)) == item_id or pin.id == item_id:
                self.wb.pins.remove(self.session_id, pin.id)
                return True
        return False

    def drop(self, item_id: str, plan: ContextPlan | None = None) -> str:
        """Leave an item out of the context; returns what was done, for the status line. A turn is dropped whole:
        when ``plan`` shows it as several items (atoms: a tool call with its result, a reply, ...), the note
        says how many leave with it."""
        gid = ItemRef.parse(item_id).group_id
        if gid is not None:
            self.wb.messages.drop(self.session_id, gid)
            parts = [i for i in (plan.items if plan is not None else ()) if ItemRef.parse(i.id).group_id == gid]
            sent = sum(1 for i in parts if i.included)
            if len(parts) > 1:
                return (f"dropped turn {gid} whole: all {len(parts)} of its items leave the context "
                        f"({sent} of them were sent; /context restore {gid} brings them back)")
            return f"dropped turn {gid} (/context restore {gid} brings it back)"
        if self.unpin(item_id):
            return f"unpinned {item_id}"
        if card_symbol(item_id) is not None:
            self.rejected.add(item_id)
            return f"{item_id} will not be suggested again (cards come and go with the mode and the query)"
        raise ValueError(f"{item_id} is mandatory or not a turn; it cannot be dropped")

    def restore(self, group_id: int) -> None:
        self.wb.messages.group(self.session_id, group_id)  # raises for an unknown group
        self.wb.messages.restore(self.session_id, group_id)

    def remove(self, group_id: int) -> None:
        self.wb.messages.group(self.session_id, group_id)  # raises for an unknown group
        self.wb.messages.remove(self.session_id, group_id)

    def undo(self) -> tuple[int | None, str | None]:
        """Remove the last turn: its group id (None when there is nothing to undo), and the ``### STATE`` now
        current when undoing brought back the version stored before that turn (None: the state did not change)."""
        return self.wb.undo(self.session_id)

    def accept(self, suggestion: Suggestion, plan: ContextPlan | None) -> Pin:
        from ctxbench.llm.suggestions import record_decision

        pin = self.pin_item(suggestion.target, "sticky", label=suggestion.label, plan=plan, suggested=True)
        record_decision(self.wb, self.session_id, suggestion.target, accept=True)
        return pin

    def reject(self, suggestion: Suggestion) -> None:
        from ctxbench.llm.suggestions import record_decision

        self.rejected.add(suggestion.target)
        record_decision(self.wb, self.session_id, suggestion.target, accept=False)

    # -- turns --------------------------------------------------------------------------------------------
    @property
    def runner(self) -> TurnRunner:
        """The session's TurnRunner, made on first use and kept for every turn and rebuild."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the session is closed")
            if self._runner is None:
                self._runner = make_runner(self.wb, self.config)
            self._runner.code = self.attached.code if self.attached is not None else None  # may have come up since
            return self._runner

    def run_turn(self, text: str, cancel: CancelToken) -> Iterator[SessionEvent]:
        """The user's turn with the tool loop, event by event (ends with one TurnFinished)."""
        group_id: int | None = None
        for event in self.runner.run(self.session_id, text, cancel=cancel):
            if isinstance(event, TurnStarted):
                group_id = event.group_id
            elif isinstance(event, PlanReady):
                yield TurnPlanned(self.view_of(event.plan, group_id), event.round)
                continue
            elif isinstance(event, ReflectionDone):
                self.reflection = event.reflection
            yield event

    def rebuild_state(self, cancel: CancelToken) -> Iterator[SessionEvent]:
        """``/context rebuild``: the model writes the ``### STATE`` afresh from the current window. Its plan is
        the rebuild prompt's, not the next turn's, so the meter keeps the turn's plan: no TurnPlanned."""
        for event in self.runner.rebuild_state(self.session_id, cancel=cancel):
            if not isinstance(event, PlanReady):
                yield event

    # -- branches -----------------------------------------------------------------------------------------
    def fork(self, name: str | None = None, at_turn: int | None = None) -> str:
        """Fork the active branch and switch to the fork; says what was done."""
        assert self.timeline is not None
        branch = self.timeline.fork(name, at_turn)
        self.settings = self.wb.settings(self.session_id)  # the fork's (inherited) settings
        where = f"at turn {branch.fork_turn}" if branch.fork_turn is not None else "at the start"
        return f"forked {branch.name} from {branch.parent} {where}; now on {branch.name}"

    def switch(self, name: str) -> str:
        assert self.timeline is not None
        branch = self.timeline.switch(name)
        self.settings = self.wb.settings(self.session_id)  # the branch's own settings
        return f"now on branch {branch.name} ({branch.turns} turns)"

    def export(self, path: Path | None = None) -> tuple[Path, int]:
        """Write the active branch as OpenAI JSONL (default: ``<session>-<branch>.jsonl`` here); (path, messages)."""
        assert self.timeline is not None
        branch = self.timeline.active().name
        target = path if path is not None else Path(f"{self.session_id}-{branch}.jsonl")
        lines = self.timeline.export_lines()
        target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return target, len(lines)

    # -- replay -------------------------------------------------------------------------------------------
    def replay(self, turn: int, settings: SessionSettings) -> ReplayPage:
        """The plan user turn ``turn`` (1-based, dropped turns counted; past the end: the last) would get under
        ``settings``, with the tool definitions a live call offers (so its meter is the live meter)."""
        from ctxbench.llm.replay import replay, user_turns

        total = len(user_turns(self.wb.visible_messages(self.session_id)))  # the kept view: no read, masked
        if not total:
            return ReplayPage(0, None, "this session has no user turns yet")
        wanted = {name: getattr(settings, name) for name in ("mode", "budget", "strategy", "window_groups")}
        step = next(replay(self.wb, self.session_id, only_turn=min(turn, total), tools_tokens=self.tools_tokens(),
                           **wanted), None)
        return ReplayPage(total, step)

    def with_settings(self, **changes: object) -> SessionSettings:
        """The stored settings with ``changes`` (not checked, not stored: a value for :meth:`plan`)."""
        return dataclasses.replace(self.stored_settings(), **changes)


def repo_name(repo: str | Path | None) -> str:
    return Path(repo).name if repo else ""
