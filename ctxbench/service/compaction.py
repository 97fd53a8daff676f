"""Compaction and tasks of a session: preview, apply, undo; the auto-compact threshold; start and end tasks.

Nothing changes until a preview is applied: :meth:`Compactor.preview` reads the active branch and returns a
:class:`~ctxbench.records.compaction.CompactionPreview`; :meth:`Compactor.apply` stores exactly the summary
that preview showed; :meth:`Compactor.undo` brings the turns back. With a model configured (a provider other
than ``offline``) the summary is written by the model — its call planned, stored and traced like any other
(:mod:`ctxbench.service.summariser`); otherwise, and whenever asked, by the extractive summariser.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ctxbench.compaction import Summariser, build_preview, extractive_summariser
from ctxbench.config import Config
from ctxbench.records.compaction import (
    KEPT,
    SUMMARISED,
    CompactionPreview,
    CompactionPressure,
    Summary,
    TaskChange,
    history_demand,
)
from ctxbench.records.errors import NotFound
from ctxbench.records.messages import Message
from ctxbench.service.workbench import Workbench
from ctxbench.store import messages as message_store
from ctxbench.store import sessions as session_store

CHOICES = (KEPT, SUMMARISED)


class Compactor:
    """Compaction of one workbench's sessions."""

    def __init__(self, wb: Workbench, config: Config | None = None) -> None:
        self.wb = wb
        self.config = config or wb.config

    # -- previews -----------------------------------------------------------------------------------
    def default_target(self, session_id: str) -> int:
        """``target_ratio`` of the history's tokens now (turns not dropped, earlier summaries as sent)."""
        return self._target(self._history(session_id), self.wb.summaries.active(session_id))

    def history_tokens(self, session_id: str) -> int:
        """The history's tokens as plans send them (after the truncation tiers; earlier summaries as sent)."""
        return self._history_tokens(self._history(session_id), self.wb.summaries.active(session_id))

    def _target(self, history: Sequence[Message], summaries: Sequence[Summary]) -> int:
        return int(self._history_tokens(history, summaries) * self.config.compaction.target_ratio)

    def _history_tokens(self, history: Sequence[Message], summaries: Sequence[Summary]) -> int:
        from ctxbench.compaction import sent_tokens

        covered = {g for s in summaries for g in s.group_ids}
        sent = sent_tokens(history, self.config.planner, self.wb.tokenizer)
        tokens = sum(t for g, t in sent.items() if g not in covered)
        return tokens + sum(s.tokens_after for s in summaries)

    def auto_target(self, budget: int) -> int:
        return int(budget * self.config.compaction.auto_target)

    def preview(self, session_id: str, *, target_tokens: int | None = None, choices: Mapping[int, str] | None = None,
                task: str | None = None, use_model: bool | None = None, summariser: Summariser | None = None,
                cancel: Any = None) -> CompactionPreview:
        """What compacting the session's active branch to ``target_tokens`` would do (default: ``target_ratio``
        of its tokens now). ``choices``: turn -> ``kept`` | ``summarised``. ``task``: summarise exactly that
        finished task's turns (``t3`` or its name). ``use_model``: None = the model when one is configured."""
        if target_tokens is not None and target_tokens < 0:
            raise ValueError(f"--target-tokens must be 0 or more, got {target_tokens}")
        for turn, choice in (choices or {}).items():
            if choice not in CHOICES:
                raise ValueError(f"turn {turn}: a choice is {' or '.join(CHOICES)}, not {choice!r}")
        wb = self.wb
        history = self._history(session_id)
        only_groups = None
        task_id = 0
        if task is not None:
            found = wb.tasks.find(session_id, task)
            if found.open:
                raise ValueError(f"task {found.name!r} is still open: end it first (/task end)")
            only_groups = [g for g in dict.fromkeys(m.group_id for m in history)
                           if found.started_group <= g <= (found.ended_group or g)]
            if not only_groups:
                raise NotFound(f"task {found.name!r} has no turns on the active branch")
            task_id = found.id
        if summariser is None:
            summariser = self._summariser(session_id, use_model, cancel)
        summaries = wb.summaries.active(session_id)
        # the history and summaries read above serve the default target too (a long branch is read once)
        target = target_tokens if target_tokens is not None else self._target(history, summaries)
        return build_preview(
            session_id=session_id, branch_id=wb.branches.active_id(session_id), history=history,
            pins=wb.pins.list(session_id), summaries=summaries,
            task=wb.tasks.current(session_id), target_tokens=target, planner=self.config.planner,
            compaction=self.config.compaction, tokenizer=wb.tokenizer,
            choices=choices, summariser=summariser, only_groups=only_groups, task_id=task_id)

    def _summariser(self, session_id: str, use_model: bool | None, cancel: Any) -> Summariser:
        wants_model = self.config.llm.provider != "offline" if use_model is None else use_model
        if wants_model:
            if self.config.llm.provider == "offline":
                raise ValueError("no model is configured ([llm] provider is offline): the summary can only be extractive")
            from ctxbench.service.summariser import model_summariser

            return model_summariser(self.wb, self.config, session_id, cancel=cancel)
        return extractive_summariser(self.config.compaction, self.wb.tokenizer, self._encoder())

    def _encoder(self) -> Any:
        """The history embedder's encode, when it is ready (semantic signal of the extractive summariser)."""
        embedder = self.wb.history.embedder()
        if embedder is None:
            return None

        def encode(texts: list[str]) -> Any:
            return embedder.encode(list(texts)).tolist()  # unit-length rows

        return encode

    def _history(self, session_id: str) -> tuple:
        with self.wb.connection() as conn:
            branch = session_store.active_branch(conn, session_id)
            return message_store.branch_messages(conn, session_id, branch, include_dropped=True)

    # -- applying -----------------------------------------------------------------------------------
    def apply(self, preview: CompactionPreview) -> Summary:
        """Store the summary ``preview`` shows; from the next plan on it stands in for its turns."""
        if preview.refusal:
            raise ValueError(preview.refusal)
        wb = self.wb
        if wb.branches.active_id(preview.session_id) != preview.branch_id:
            raise ValueError("the active branch changed since the preview: make a new preview")
        taken = {g for s in wb.summaries.active(preview.session_id) for g in s.group_ids}
        clash = sorted(taken.intersection(preview.summarised_groups))
        if clash:
            raise ValueError(f"turns {', '.join(map(str, clash))} were summarised since the preview: make a new one")
        before = sum(r.tokens for r in preview.rows if r.group_id in set(preview.summarised_groups))
        return wb.summaries.add(preview.session_id, group_ids=preview.summarised_groups,
                                message_ids=preview.message_ids, text=preview.summary_text, source=preview.source,
                                tokens_before=before, tokens_after=preview.summary_tokens,
                                kept_groups=preview.kept_groups, task_id=preview.task_id)

    def undo(self, session_id: str, summary_id: int | None = None) -> Summary:
        """Undo a summary (default: the newest in force): its turns are sent again from the next plan on."""
        return self.wb.summaries.undo(session_id, summary_id)

    # -- standing instructions ----------------------------------------------------------------------
    def mark_instruction(self, session_id: str, group_id: int, on: bool = True) -> str:
        """Mark (``on``) or unmark the user's message of turn ``group_id`` as a standing instruction, whatever the
        detector says: the ``instruction`` / ``not_instruction`` flag. Compaction protects a marked turn and
        ``fused`` offers it first; an unmarked one is neither. Returns what changed, in a line."""
        from ctxbench.planner.instructions import MARK_FLAG, UNMARK_FLAG

        user = next((m for m in self._history(session_id) if m.group_id == group_id and m.role == "user"), None)
        if user is None:
            raise NotFound(f"turn {group_id} has no user message on the active branch of {session_id}")
        keep = [f for f in user.flags if f not in (MARK_FLAG, UNMARK_FLAG)]
        self.wb.messages.set_flags(session_id, user.id, (*keep, MARK_FLAG if on else UNMARK_FLAG))
        return (f"turn {group_id} is a standing instruction (protected from compaction, offered first)" if on else
                f"turn {group_id} is not a standing instruction")

    # -- the auto-compact threshold -----------------------------------------------------------------
    def threshold(self, session_id: str) -> float:
        own = self.wb.summaries.auto_threshold(session_id)
        return self.config.compaction.auto_threshold if own is None else own

    def set_threshold(self, session_id: str, value: float | None) -> float:
        """Set the session's threshold (a share of the budget, 0 = off; None = the config's); the one in force."""
        if value is not None and not 0 <= value <= 10:
            raise ValueError(f"an auto-compact threshold is a share of the budget from 0% (off) up, got {value:.0%}")
        self.wb.summaries.set_auto_threshold(session_id, value)
        return self.threshold(session_id)

    def pressure(self, session_id: str, plan: Any) -> CompactionPressure:
        return CompactionPressure(history_demand(plan), plan.budget, self.threshold(session_id))

    # -- tasks --------------------------------------------------------------------------------------
    def start_task(self, session_id: str, name: str) -> TaskChange:
        """Open a task from the next turn on (the open one ends with the last turn)."""
        with self.wb.connection() as conn:
            first = session_store.next_group_id(conn, session_id)
        return self.wb.tasks.start(session_id, name, first_group=first, opened_by="user")

    def end_task(self, session_id: str) -> TaskChange:
        with self.wb.connection() as conn:
            last = session_store.next_group_id(conn, session_id) - 1
        change = self.wb.tasks.end(session_id, last_group=last)
        if change.ended is None:
            raise NotFound("no task is open (start one with /task start NAME)")
        return change


def parse_share(text: str) -> float | None:
    """``80%``, ``0.8`` or ``80`` -> 0.8; ``off`` -> 0.0; ``default`` -> None (the config's)."""
    value = text.strip().lower()
    if value in ("off", "none", "0", "0%"):
        return 0.0
    if value in ("default", "config"):
        return None
    try:
        number = float(value.rstrip("%"))
    except ValueError:
        raise ValueError(f"expected a share of the budget like 80% or off, got {text!r}") from None
    share = number / 100 if value.endswith("%") or number > 1 else number
    if share < 0:
        raise ValueError(f"a threshold cannot be negative, got {text!r}")
    return share


def parse_choices(kept: str | None, summarised: str | None) -> dict[int, str]:
    """``--keep 4,7-9 --summarise 2`` -> {4: kept, 7: kept, 8: kept, 9: kept, 2: summarised}."""
    out: dict[int, str] = {}
    for spec, choice in ((kept, KEPT), (summarised, SUMMARISED)):
        for turn in turn_list(spec or ""):
            if out.get(turn, choice) != choice:
                raise ValueError(f"turn {turn} cannot be both kept and summarised")
            out[turn] = choice
    return out


def turn_list(spec: str) -> list[int]:
    """``4,7-9`` -> [4, 7, 8, 9]."""
    out: list[int] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        first, dash, last = part.partition("-")
        try:
            lo = int(first)
            hi = int(last) if dash else lo
        except ValueError:
            raise ValueError(f"turns are numbers or ranges like 4,7-9, got {part!r}") from None
        if hi < lo:
            raise ValueError(f"empty range of turns: {part!r}")
        out.extend(range(lo, hi + 1))
    return out
