"""What a compaction would do, turn by turn: the pure rules behind ``/compact`` and ``ctxbench compact``.

Every turn of the active branch gets one disposition:

- **dropped** — the user dropped it before (it is sent neither way);
- **summarised (sN)** — an earlier summary already stands in for it;
- **protected** — never summarised, with the reason: it holds a system message, a sticky pin is on it, the
  user stated a standing instruction in it (the ``levels`` strategy's permanent level: "always", "never",
  "from now on", ..., or what the standing-instruction detector recognises by its cues: "the staging API listens
  on port 8443"), it holds the latest ``### STATE`` block, or a lease of the open task is on it;
- **kept** — sent verbatim: the newest ``keep_recent_turns``, a turn the user chose to keep, or one the
  target does not need;
- **summarised** — replaced by the new summary.

Without choices, the oldest unprotected turns are summarised until the history (kept turns, earlier
summaries and the new summary's estimated size) fits ``target_tokens``. The user's choices (turn ->
kept | summarised) override that for any turn not protected, dropped or already summarised.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ctxbench.config import CompactionConfig, InstructionConfig, LevelsConfig
from ctxbench.planner.instructions import UNMARK_FLAG, is_standing_instruction
from ctxbench.planner.render import short
from ctxbench.planner.strategies.levels import states_instruction
from ctxbench.records.compaction import DROPPED, KEPT, PROTECTED, SUMMARISED, Summary, Task, TurnDisposition
from ctxbench.records.messages import Message
from ctxbench.records.plans import Pin
from ctxbench.records.speakers import reads_as_transcript, speaker_label
from ctxbench.records.state import state_span
from ctxbench.records.item_refs import ItemRef


@dataclass(frozen=True)
class Turn:
    group_id: int
    messages: tuple[Message, ...]  # active messages
    tokens: int
    dropped: bool


def turns_of(history: Sequence[Message], sent: Mapping[int, int] | None = None) -> list[Turn]:
    """The turns of a branch's history (active and dropped messages), oldest first. ``sent``: turn -> the tokens a
    plan sends of it (after the truncation tiers); without it, the stored messages' own counts."""
    order: list[int] = []
    by_group: dict[int, list[Message]] = {}
    for m in history:
        if m.group_id not in by_group:
            order.append(m.group_id)
            by_group[m.group_id] = []
        by_group[m.group_id].append(m)
    out = []
    for gid in order:
        msgs = by_group[gid]
        active = tuple(m for m in msgs if m.status == "active")
        tokens = sent.get(gid, 0) if sent is not None else sum(m.tokens for m in active)
        out.append(Turn(gid, active, tokens, not active))
    return out


def pinned_group(target: str) -> int | None:
    """The turn a pin target points into (``group:12``, ``atom:12:40``), else None."""
    return ItemRef.parse(target).group_id


def _instruction(m: Message, levels: LevelsConfig, instructions: InstructionConfig | None, transcript: bool) -> bool:
    """A user's message that states a standing instruction: by the levels' phrases or flag, or by the detector
    (in a transcript of speakers, by the flag only); the user's ``not_instruction`` flag says it is none."""
    if UNMARK_FLAG in m.flags:
        return False
    if transcript:  # "Caroline: I always loved painting" is talk, not a rule: only the user's flag counts there
        return levels.instruction_flag in m.flags
    if states_instruction(m.content, m.flags, levels):
        return True
    return instructions is not None and is_standing_instruction(m.content, m.flags, instructions)


def reads_as_speakers(turns: Sequence[Turn], share: float) -> bool:
    """Whether the turns' messages read as a transcript of speakers ("Caroline: ...")."""
    texted = [m.content for t in turns for m in t.messages if m.role in ("user", "assistant") and m.content]
    return reads_as_transcript(sum(1 for c in texted if speaker_label(c)), len(texted), share)


def protections(turns: Sequence[Turn], pins: Sequence[Pin], task: Task | None, levels: LevelsConfig,
                instructions: InstructionConfig | None = None, speaker_share: float = 0.5) -> dict[int, str]:
    """turn -> why it may never be summarised."""
    out: dict[int, str] = {}
    transcript = instructions is not None and reads_as_speakers(turns, speaker_share)
    state_turn = None
    for turn in turns:
        if any(m.role == "assistant" and state_span(m.content) is not None for m in turn.messages):
            state_turn = turn.group_id
    for pin in pins:
        gid = pinned_group(pin.target)
        if gid is None:
            continue
        if pin.kind == "sticky":
            out.setdefault(gid, f"sticky pin {pin.id}")
        elif pin.kind == "leased" and pin.scope == "task" and pin.ttl > 0 and task is not None:
            out.setdefault(gid, f"leased for task {task.name!r} ({pin.id})")
    for turn in turns:
        if turn.dropped or turn.group_id in out:
            continue
        if any(m.role == "system" for m in turn.messages):
            out[turn.group_id] = "holds a system message"
        elif any(m.role == "user" and _instruction(m, levels, instructions, transcript) for m in turn.messages):
            out[turn.group_id] = "standing instruction"
        elif turn.group_id == state_turn:
            out[turn.group_id] = "holds the latest ### STATE block"
    return out


def summary_budget(tokens: int, config: CompactionConfig) -> int:
    """How long a summary of ``tokens`` may be."""
    return max(config.summary_min_tokens, min(config.summary_max_tokens, int(tokens * config.summary_ratio)))


@dataclass(frozen=True)
class Dispositions:
    rows: tuple[TurnDisposition, ...]
    summarised: tuple[Turn, ...]  # the turns the new summary covers
    kept_with_summary: tuple[int, ...]  # protected turns older than the last summarised one: sent beside it
    summary_max_tokens: int
    target_reached: bool


def _first_words(turn: Turn, chars: int) -> str:
    user = next((m.content for m in turn.messages if m.role == "user"), "")
    return short(user, chars) if user else "(no user message)"


def dispositions(turns: Sequence[Turn], summaries: Sequence[Summary], protected: Mapping[int, str],
                 target_tokens: int, config: CompactionConfig, choices: Mapping[int, str] | None = None
                 ) -> Dispositions:
    """Each turn's disposition for a compaction to ``target_tokens`` (see the module's docstring)."""
    choices = choices or {}
    covered = {g: s for s in summaries for g in s.group_ids}
    earlier_tokens = sum(s.tokens_after for s in summaries)
    live = [t for t in turns if not t.dropped and t.group_id not in covered]
    recent = {t.group_id for t in live[-config.keep_recent_turns:]} if config.keep_recent_turns > 0 else set()
    decided: dict[int, tuple[str, str]] = {}
    open_turns: list[Turn] = []
    for t in live:
        choice = choices.get(t.group_id)
        if t.group_id in protected:
            decided[t.group_id] = (PROTECTED, protected[t.group_id])
        elif choice == KEPT:
            decided[t.group_id] = (KEPT, "kept by you")
        elif choice == SUMMARISED:
            decided[t.group_id] = (SUMMARISED, "summarised by you")
        elif t.group_id in recent:
            decided[t.group_id] = (KEPT, "recent turn")
        else:
            open_turns.append(t)

    kept_tokens = sum(t.tokens for t in live if decided.get(t.group_id, (KEPT, ""))[0] != SUMMARISED)
    gone = sum(t.tokens for t in live if decided.get(t.group_id, (KEPT, ""))[0] == SUMMARISED)

    def cap() -> int:  # the new summary's length: its share of the turns, within what the target leaves
        room = target_tokens - kept_tokens - earlier_tokens
        return min(summary_budget(gone, config), max(config.summary_min_tokens, room))

    def total() -> int:
        return kept_tokens + earlier_tokens + (cap() if gone else 0)

    for t in open_turns:  # oldest first, until the target is met
        if total() <= target_tokens:
            break
        kept_tokens -= t.tokens
        gone += t.tokens
        decided[t.group_id] = (SUMMARISED, "oldest turns first, to reach the target")
    for t in open_turns:
        decided.setdefault(t.group_id, (KEPT, "the target is met without it"))
    reached = total() <= target_tokens

    rows: list[TurnDisposition] = []
    for t in turns:
        words = _first_words(t, config.first_words_chars)
        if t.dropped:
            rows.append(TurnDisposition(t.group_id, DROPPED, "dropped by you", 0, words, False))
        elif t.group_id in covered:
            s = covered[t.group_id]
            rows.append(TurnDisposition(t.group_id, SUMMARISED, f"in summary s{s.id}", t.tokens, words, False,
                                        summary=f"s{s.id}"))
        else:
            disposition, reason = decided[t.group_id]
            rows.append(TurnDisposition(t.group_id, disposition, reason, t.tokens, words,
                                        toggleable=disposition != PROTECTED))
    summarised = tuple(t for t in live if decided[t.group_id][0] == SUMMARISED)
    kept: tuple[int, ...] = ()
    if summarised:
        last = summarised[-1].group_id
        kept = tuple(sorted(g for g, (d, _r) in decided.items() if d == PROTECTED and g < last))
    budget = cap() if summarised else 0
    return Dispositions(tuple(rows), summarised, kept, budget, reached)
