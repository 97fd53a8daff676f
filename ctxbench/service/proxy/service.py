"""The proxy's application layer: a request in, the body to forward out, and everything recorded.

:meth:`ProxyService.begin` reads a request (:mod:`service.proxy.wire`), recognises its conversation,
stores the messages it adds as the session's history, builds its plan — steered with the user's controls
when the proxy steers and the conversation is not switched to pass-through (:mod:`service.proxy.plan`) —
and stores the plan and the exchange (the original body, and the upstream body when it differs). The
front end forwards :attr:`Exchange.forward_body`, feeds the reply to :meth:`recorder`, and ends with
:meth:`finish` (status, outcome, reply text, reported usage).

A conversation is recognised by its growing prefix: the request's messages (system prompts and the
assistant's scaffolding aside, and compared without the scaffolding inside them: ``WireMessage.identity``)
start with every message of a stored conversation's latest request; the
longest such conversation wins. A Responses API request naming a ``previous_response_id`` continues the
session of that reply. When none does, a conversation whose last reply the request quotes (the summary an
assistant writes when it compacts its history) continues; otherwise a new session starts, titled by the
user's own latest words, and taken away again if no model answered its first request. Each request also
records what a prefix cache could serve of it (``proxy_cache``), beside the cached tokens reported.

Nothing here may turn a valid request into an error: a body that cannot be read, or a store that fails,
gives an :class:`Exchange` that forwards the body unchanged and records nothing (``note`` says why).
Request headers never reach this layer, so no key can be stored.
"""
from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

from ctxbench.config import Config
from ctxbench.records.derived import deriving_for
from ctxbench.records.plans import ContextPlan, PlanInputs
from ctxbench.records.proxy import (CacheReport, ConversationState, DiffEntry, PlanDiff, ProxyExchange, ReplyRecord,
                                    WireRequest)
from ctxbench.service.proxy.body import BodyCut
from ctxbench.service.proxy.masking import Masker, mask
from ctxbench.service.proxy.plan import PROXY_STRATEGY, SteerControls, SteeredPlan, steer_plan, steered_mode
from ctxbench.service.proxy.policy import due_deferred, with_policy
from ctxbench.service.proxy.pricing import billed_usage, breakpoints
from ctxbench.service.proxy.calibration import COUNT_TOKENS_PATH, record_count
from ctxbench.service.proxy.reply import COUNT_TOKENS, ReplyRecorder
from ctxbench.service.proxy.cache_view import cache_blocks, fixed_tokens, shared_prefix
from ctxbench.service.proxy.edits import apply_edits
from ctxbench.service.proxy.neutral import neutral_messages
from ctxbench.service.proxy.wire import parse_request, provider_for_path
from ctxbench.service.proxy.wire_parts import WireError
from ctxbench.service.workbench import Workbench
from ctxbench.store import sessions as session_store

TITLE_CHARS = 60
FAILED_UPSTREAM = ("upstream_error", "upstream_down")  # outcomes where no model answered
PREVIOUS_LOOKBACK = 8  # failed requests passed over to find the previous answered one (the cache it warmed)
TITLE_SOURCE_CHARS = 4 * TITLE_CHARS  # the start of the user's words a title is made from (masked first)
FORWARDED_UNSTEERED = ("not steered: the request went upstream as it arrived (above proxy.max_request_bytes, "
                       "or sent without a length)")
PARAGRAPH_MIN_CHARS = 40  # paragraphs of a reply shorter than this say too little to recognise it by


@dataclass(frozen=True)
class Exchange:
    """A request on its way: what to forward, and what to record its reply against."""

    id: int | None  # None: not recorded
    session_id: str
    provider: str | None
    stream: bool
    forward_body: bytes
    steered: bool = False
    plan: ContextPlan | None = None
    note: str = ""  # why the request is not recorded, or what steering did
    new_session: bool = False  # the request started its session (a failure upstream takes the session away)


class ProxyService:
    """Records (and, with ``steer``, steers) the requests of one proxy over one workbench."""

    def __init__(self, wb: Workbench, *, steer: bool = False) -> None:
        self.wb = wb
        self.config: Config = wb.config
        self.steer = steer
        self._lock = threading.Lock()  # one request's recognise-and-store at a time

    # -- a request ------------------------------------------------------------------------------------------
    def provider(self, path: str) -> str | None:
        """The wire format of a path the proxy records (None: forwarded unrecorded; ``count_tokens``: not an
        exchange, but its answer calibrates the token counts)."""
        if path.rstrip("/").endswith(COUNT_TOKENS_PATH):
            return COUNT_TOKENS
        return provider_for_path(path)

    def begin(self, path: str, body: bytes, *, cut: BodyCut | None = None, forwarded: bool = False) -> Exchange:
        """Record a request. ``forwarded``: it went upstream as the client sent it already (nothing steers it);
        ``cut``: ``body`` is a large request's copy with its long texts cut (the plan says so)."""
        provider = provider_for_path(path)
        if self.provider(path) == COUNT_TOKENS:
            # not recorded as an exchange: its answer calibrates the proxy's counts (finish); a body whose texts
            # were cut (a large request, forwarded as it came) cannot be counted the same
            if cut is not None:
                return Exchange(None, "", None, False, body, note="count_tokens: too large to calibrate from")
            return Exchange(None, "", COUNT_TOKENS, False, body, note="count_tokens: calibrates the token counts")
        if provider is None:
            return Exchange(None, "", None, False, body, note="not a chat request")
        if len(body) > self.config.proxy.max_request_bytes:
            return Exchange(None, "", provider, False, body, note="not recorded: above proxy.max_request_bytes")
        try:
            request = parse_request(provider, body, self.wb.tokenizer, path)
        except WireError as exc:
            return Exchange(None, "", provider, False, body, note=f"not recorded: {exc}")
        masker = Masker()
        with self._lock:
            session_id, state, created = self._record_messages(request, masker)
            controls = self.controls(session_id, state)
            if forwarded:
                controls = dataclasses.replace(controls, steer=False)
            n = len(request.history)  # a chained request's state holds the earlier messages too: its own are last

            def steer(controls: SteerControls) -> tuple[SteeredPlan, bytes, WireRequest]:
                steered = steer_plan(request, session_id, state.groups[len(state.groups) - n:],
                                     state.message_ids[len(state.message_ids) - n:], controls,
                                     proxy=self.config.proxy, truncation=self.config.planner.truncation,
                                     tokenizer=self.wb.tokenizer)
                forward = body if steered.edits.empty else apply_edits(request, steered.edits)
                return steered, forward, request if forward is body else parse_request(provider, forward,
                                                                                       self.wb.tokenizer, path)

            steered, forward, sent = steer(controls)
            answered = None if created else self._previous_answered(session_id)
            previous = self.wb.proxy_cache.fingerprint(answered.id) if answered is not None else None
            due = due_deferred(self.wb, session_id, sent, previous, answered, self.config.proxy.cache_ttl_s) \
                if controls.steer and not created else ()
            if due:  # drops the user held back for the cache, now that it breaks (or expired) anyway
                for item_id in due:
                    self.wb.proxy.drop(session_id, item_id)
                    self.wb.proxy_policy.undefer(session_id, item_id)
                controls = self.controls(session_id, state)
                steered, forward, sent = steer(controls)
                held = tuple(f"applied the drop of {i} you held back: the prompt cache broke before it anyway "
                             "(or expired)" for i in due)
                steered = dataclasses.replace(steered, changes=(*held, *steered.changes))
            plan = steered.plan
            notes = ((FORWARDED_UNSTEERED,) if forwarded and self.steer else ()) + ((cut.note(),) if cut else ())
            if notes:
                plan = dataclasses.replace(plan, notes=(*plan.notes, *notes),
                                           estimated=plan.estimated or cut is not None)
                steered = dataclasses.replace(steered, plan=plan)
            blocks = cache_blocks(sent)
            with self.wb.transaction():  # the plan, the exchange and its cache and billing rows: one commit
                # what is stored is masked; what is forwarded is not (service.proxy.masking)
                self.wb.plans.save(masker.inputs(self._inputs(request, session_id, controls, steered)),
                                   masker.plan(plan))
                exchange_id = self.wb.proxy.add_exchange(
                    session_id=session_id, plan_id=steered.plan.plan_id, provider=provider, path=path,
                    model=request.model, stream=request.stream, request=masker.body(body, request.body),
                    upstream_request=None if forward is body else masker.body(forward),
                    changes=[masker.mask(c) for c in steered.changes], estimated=steered.plan.used_tokens)
                shared, tokens = shared_prefix(previous, blocks)
                total = sum(t for _h, t in blocks)
                self.wb.proxy_cache.add(session_id, CacheReport(exchange_id, shared, tokens, total, previous is None),
                                        blocks)
                self.wb.proxy_billing.add(exchange_id, session_id, request.model, total, breakpoints(sent),
                                          fixed_tokens(sent))
        return Exchange(exchange_id, session_id, provider, request.stream, forward, forward is not body, steered.plan,
                        "; ".join(steered.changes), new_session=created)

    def _previous_answered(self, session_id: str) -> ProxyExchange | None:
        """The conversation's latest request a model answered (whose prefix the provider may have cached), or None."""
        before = self.wb.proxy.latest_exchange(session_id)
        for _ in range(PREVIOUS_LOOKBACK):
            if before is None or before.outcome == "ok":
                break
            before = self.wb.proxy.latest_exchange(session_id, before=before.id)
        return before if before is not None and before.outcome == "ok" else None

    def recorder(self, exchange: Exchange, *, stream: bool) -> ReplyRecorder:
        p = self.config.proxy
        return ReplyRecorder(exchange.provider or "openai", stream=stream, max_chars=p.record_reply_chars,
                             max_body_bytes=p.record_body_bytes)

    def save_partial(self, exchange: Exchange, reply: ReplyRecord) -> None:
        """Keep what has arrived of a reply still streaming (the exchange stays pending)."""
        if exchange.id is not None:
            self.wb.proxy.save_partial_reply(exchange.id, mask(reply.text), reply.cut)

    def close_pending(self) -> int:
        """Exchanges a proxy left pending when it was killed, closed as cut with what they received; how many.
        (Run as a proxy starts: a proxy still running on the same store finishes its own over this.)"""
        return self.wb.proxy.close_pending("the proxy stopped before the reply ended (what arrived is kept)")

    def finish(self, exchange: Exchange, *, status: int | None, outcome: str, reply: ReplyRecord,
               error: str = "") -> bool:
        """Record how the exchange ended; the usage the provider reported goes beside the plan's estimate.
        False when nothing is kept of it: the first request of a conversation that no model answered."""
        if exchange.id is None:
            if exchange.provider == COUNT_TOKENS and outcome == "ok" and reply.prompt_tokens is not None:
                record_count(self.wb, exchange.forward_body, reply.prompt_tokens)
            return False
        if exchange.new_session and outcome in FAILED_UPSTREAM:
            # the conversation's first request never reached a model: no session is left for it (the client got
            # the upstream's error as it was sent, and the proxy's log says so)
            self.wb.delete_session(exchange.session_id)
            return False
        with self.wb.transaction():  # everything the exchange left, in one commit
            # the usage and the last reply first: whoever sees the exchange ended sees everything it left
            if exchange.plan is not None and (reply.prompt_tokens is not None or outcome == "ok"):
                self.wb.plans.record_usage(exchange.plan.plan_id, exchange.plan.used_tokens, reply.prompt_tokens,
                                           reply.model or "")
            text = mask(reply.text)
            if outcome == "ok" and text:
                self.wb.proxy.set_last_reply(exchange.session_id, text)
            if reply.prompt_tokens is not None or reply.cached_tokens is not None:
                self.wb.proxy_cache.set_reported(exchange.id, reply.cached_tokens, reply.prompt_tokens)
            usage = billed_usage(reply)
            if usage is not None:
                self.wb.proxy_billing.set_usage(exchange.id, usage)
            if outcome == "ok" and reply.response_id:
                self.wb.proxy_chains.add(reply.response_id, exchange.session_id, exchange.id)
            self.wb.proxy.finish_exchange(
                exchange.id, status=status, outcome=outcome, error=mask(error[: self.config.proxy.error_excerpt_chars]),
                reply=text, reply_cut=reply.cut, reported_prompt=reply.prompt_tokens,
                reported_completion=reply.completion_tokens, model=reply.model)
        return True

    # -- recognising the conversation ------------------------------------------------------------------------
    def _chained(self, request: WireRequest) -> ConversationState | None:
        """The conversation whose reply a Responses API request names as ``previous_response_id``."""
        if not request.previous_response_id:
            return None
        session_id = self.wb.proxy_chains.session_of(request.previous_response_id)
        return self.wb.proxy.conversation(session_id) if session_id is not None else None

    def recognise(self, request: WireRequest, masker: Masker | None = None) -> tuple[ConversationState | None, int]:
        """The stored conversation ``request`` continues and how many of its messages it shares (0 for a
        compacted conversation), or (None, 0) for a new one."""
        hashes = tuple(m.identity for m in request.history)
        if not hashes:
            return None, 0
        limit = self.config.proxy.recent_conversations
        best, best_len = None, 0
        for conv in self.wb.proxy.candidates(request.provider, hashes[0], limit):
            n = len(conv.hashes)
            if best_len < n <= len(hashes) and hashes[:n] == conv.hashes:
                best, best_len = conv, n
        if best is not None:
            return best, best_len
        min_chars = self.config.proxy.compaction_min_chars
        recent = [c for c in self.wb.proxy.recent(request.provider, limit) if len(c.last_reply.strip()) >= min_chars]
        if not recent:
            return None, 0
        # the stored last reply is masked: so is what is compared with it
        quoted = (masker or Masker()).mask(
            "\n".join(p.text for m in request.history[:2] for p in m.parts if p.kind in ("text", "file")))
        for conv in recent:
            if _quotes(quoted, conv.last_reply, min_chars):
                return conv, 0
        return None, 0

    def _record_messages(self, request: WireRequest, masker: Masker) -> tuple[str, ConversationState, bool]:
        """Store the messages the request adds to its conversation (a new session for a new one)."""
        wb = self.wb
        chained = self._chained(request)
        conv, shared = (chained, len(chained.hashes)) if chained is not None else self.recognise(request, masker)
        history = request.history
        start = 0 if chained is not None else shared  # the first of the request's messages not stored yet
        with wb.transaction():
            if conv is None:
                words = masker.mask(_latest_words(request)[:TITLE_SOURCE_CHARS])  # a title shows no secret
                title = f"proxy: {' '.join(words.split())[:TITLE_CHARS] or request.model or request.provider}"
                session_id = wb.sessions.create(title, None)
                wb.update_settings(session_id, budget=self.config.proxy.budget)
                ids: list[tuple[int, ...]] = []
                groups: list[int] = []
                passthrough, requests, last_reply = False, 0, ""
            else:
                session_id = conv.session_id
                ids, groups = list(conv.message_ids[:shared]), list(conv.groups[:shared])
                passthrough, requests, last_reply = conv.passthrough, conv.requests, conv.last_reply
            group = groups[-1] if groups else (conv.groups[-1] if conv is not None and conv.groups else None)
            names: dict[str, str] = {}
            for m in history[:start]:
                for p in m.parts:
                    if p.kind == "tool_call":
                        names[p.tool_call_id] = p.tool_name
            for m in history[start:]:
                new_turn = m.has_user_text and not m.answers_tools
                stored: list[int] = []
                for n, neutral in enumerate(map(masker.neutral, neutral_messages(m, names))):
                    message = wb.messages.append(
                        session_id, neutral.role, neutral.content,
                        group_id=None if (new_turn and n == 0) or group is None else group,
                        tool_calls=neutral.tool_calls, tool_call_id=neutral.tool_call_id,
                        tool_name=neutral.tool_name, parsing_strategy=request.provider)
                    group = message.group_id
                    stored.append(message.id)
                ids.append(tuple(stored))
                groups.append(group or 0)
            earlier = conv.hashes if chained is not None else ()  # a chained request sends only what is new
            state = ConversationState(session_id, request.provider, (*earlier, *(m.identity for m in history)),
                                      tuple(ids), tuple(groups), last_reply, passthrough, requests + 1, "")
            wb.proxy.save_conversation(state)
        return session_id, state, conv is None

    # -- the user's controls --------------------------------------------------------------------------------
    def controls(self, session_id: str, state: ConversationState | None = None) -> SteerControls:
        wb = self.wb
        state = state or wb.proxy.conversation(session_id)
        settings = wb.settings(session_id)
        with wb.connection() as conn, deriving_for(session_id):
            # the workbench's kept view of the branch, brought up to date with what changed: not every message
            # of the session read again on each request
            dropped = wb.history_cache.dropped_groups(conn, session_id, session_store.active_branch(conn, session_id))
        steer = self.steer and not (state.passthrough if state is not None else False)
        own = SteerControls(steer=steer, proxy_steers=self.steer, mode=settings.mode, budget=settings.budget,
                            mode_set="mode" in wb.sessions.overrides(session_id),
                            dropped_groups=frozenset(dropped),
                            dropped_items=wb.proxy.drops(session_id), pins=wb.pins.list(session_id))
        return with_policy(wb, own, session_id)  # the rules set once for every proxied conversation

    def _inputs(self, request: WireRequest, session_id: str, controls: SteerControls,
                steered: SteeredPlan) -> PlanInputs:
        """What the stored plan was built from. The messages themselves are the session's history and the
        exchange's stored body, so they are not copied into the plan's inputs; the mode is the one that
        shaped the plan (none unless the user set it), the strategy ``proxy``: nothing a planner would have chosen."""
        plan = steered.plan
        return PlanInputs(session_id=session_id, query=plan.query, history=(), current_turn=(),
                          budget=controls.budget, mode=steered_mode(controls), strategy=PROXY_STRATEGY,
                          provider_family=request.provider,
                          system_prompt="\n\n".join(p.text for p in request.system), pins=controls.pins,
                          dropped_groups=tuple(sorted(controls.dropped_groups)), tokenizer=self.wb.tokenizer.name,
                          tools_tokens=sum(t.tokens for t in request.tools))


def _latest_words(request: WireRequest) -> str:
    """The user's own latest words in ``request``: the newest user text that is not the assistant's scaffolding
    (reminders, memory files, few-shot examples, environment)."""
    for m in reversed(request.history):
        if m.role == "user":
            texts = [p.text for p in m.parts if p.kind == "text" and not p.scaffold and p.text.strip()]
            if texts:
                return texts[-1]
    return ""


def _quotes(text: str, reply: str, min_chars: int) -> bool:
    """Whether ``text`` quotes at least ``min_chars`` characters of ``reply``'s longer paragraphs."""
    if len(reply.strip()) < min_chars:
        return False
    quoted = sum(len(p) for p in (line.strip() for line in reply.splitlines())
                 if len(p) >= PARAGRAPH_MIN_CHARS and p in text)
    return quoted >= min_chars


def plan_diff(before: ContextPlan | None, after: ContextPlan) -> PlanDiff:
    """Items of ``after`` that entered the context since ``before``, left it, or changed size."""
    old = {i.id: i for i in before.included} if before is not None else {}
    new = {i.id: i for i in after.included}
    entered = tuple(DiffEntry(i.id, i.label, i.section, 0, i.tokens) for i in after.included if i.id not in old)
    left = tuple(DiffEntry(i.id, i.label, i.section, i.tokens, 0) for i in before.included if i.id not in new) \
        if before is not None else ()
    changed = tuple(DiffEntry(i.id, i.label, i.section, old[i.id].tokens, i.tokens) for i in after.included
                    if i.id in old and old[i.id].tokens != i.tokens)
    return PlanDiff(entered, left, changed)
