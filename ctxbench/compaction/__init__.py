"""Compaction (seed 004): previews of what summarising history would do, and the extractive summariser.

``build_preview`` is the whole engine of ``/compact`` and ``ctxbench compact``: it reads nothing and writes
nothing; the service hands it the branch's history, pins, summaries and open task, and stores the result
only when the user applies it. Engine module: never imports textual or rich.
"""
from __future__ import annotations

import re
from typing import Callable, Mapping, Sequence

from ctxbench.compaction import extractive
from ctxbench.compaction.preview import Dispositions, Turn, dispositions, protections, turns_of
from ctxbench.config import CompactionConfig, PlannerConfig
from ctxbench.planner.render import summary_message
from ctxbench.records.compaction import SOURCE_EXTRACTIVE, CompactionPreview, Summary, Task
from ctxbench.records.messages import Message
from ctxbench.records.plans import Pin
from ctxbench.tokens import Tokenizer, count_message

# (turns to summarise, each its active messages; the summary's token limit) -> (text, source, cost note)
Summariser = Callable[[Sequence[Sequence[Message]], int], tuple[str, str, str]]


def extractive_summariser(compaction: CompactionConfig, tokenizer: Tokenizer,
                          encode: extractive.Encode | None = None) -> Summariser:
    def run(groups: Sequence[Sequence[Message]], max_tokens: int) -> tuple[str, str, str]:
        return extractive.summarise(groups, max_tokens, tokenizer, compaction, encode), SOURCE_EXTRACTIVE, ""

    return run


def summary_tokens(text: str, source: str, group_ids: Sequence[int], tokenizer: Tokenizer) -> int:
    """Tokens of a summary as the planner sends it (its header included)."""
    probe = Summary(0, "", "", tuple(group_ids), (), text, source, 0, 0, "")
    return count_message(tokenizer, summary_message(probe))


def sent_tokens(history: Sequence[Message], planner: PlannerConfig, tokenizer: Tokenizer) -> dict[int, int]:
    """Turn -> the tokens a plan sends of it whole: its history atoms as the planner renders them (tool results cut
    by the truncation tiers of a turn that is not the current one), so the preview counts what the meter counts."""
    from ctxbench.planner.atoms import history_layout
    from ctxbench.records.messages import strategy_family

    active = tuple(m for m in history if m.status == "active")
    layout = history_layout(active, strategy_family(planner.provider_family), planner.truncation, tokenizer)
    return {view.group_id: view.eligible_tokens for view in layout.views}


def _spans(groups: Sequence[int]) -> str:
    """[3, 4, 5, 9] -> "3-5, 9"."""
    out: list[str] = []
    for g in groups:
        if out and out[-1].split("-")[-1] == str(g - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{g}"
        else:
            out.append(str(g))
    return ", ".join(out)


def squeeze_note(turns: Sequence[Turn], text: str, summary_tokens: int, limit: float) -> str:
    """A warning when the summary is more than ``limit`` times smaller than the turns it replaces, naming what it
    drops: the turns it has no line of (an extractive summary's lines name their turn), else "" ."""
    replaced = sum(t.tokens for t in turns)
    if not summary_tokens or replaced <= limit * summary_tokens:
        return ""
    named = {int(g) for g in re.findall(r"^- turn (\d+) —", text, flags=re.MULTILINE)}
    if named:
        gone = [t.group_id for t in turns if t.group_id not in named]
        drops = (f"it has no line of {len(gone)} of the {len(turns)} turns ({_spans(gone)})" if gone
                 else f"it keeps about {summary_tokens // max(len(turns), 1)} tokens per turn")
    else:
        drops = f"it keeps about {summary_tokens // max(len(turns), 1)} tokens of each of {len(turns)} turns"
    return (f"the summary is {replaced / summary_tokens:.0f}x smaller than the {replaced:,} tokens of {len(turns)} "
            f"turns it replaces: {drops}; their originals stay findable (retrieval strategies recall them verbatim)")


def build_preview(*, session_id: str, branch_id: str, history: Sequence[Message], pins: Sequence[Pin],
                  summaries: Sequence[Summary], task: Task | None, target_tokens: int,
                  planner: PlannerConfig, compaction: CompactionConfig, tokenizer: Tokenizer, choices: Mapping[int, str] | None = None,
                  summariser: Summariser | None = None, only_groups: Sequence[int] | None = None,
                  task_id: int = 0) -> CompactionPreview:
    """What compacting ``history`` (the active branch's, active and dropped messages) to ``target_tokens``
    would do. ``only_groups``: summarise exactly these turns (a finished task's) and keep the rest."""
    turns = turns_of(history, sent_tokens(history, planner, tokenizer))
    protected = protections(turns, pins, task, planner.levels, planner.instructions, planner.fused.speaker_share)
    notes: list[str] = []
    if choices and only_groups is None:
        known = {t.group_id for t in turns}
        unknown = sorted(set(choices) - known)
        if unknown:
            raise ValueError(f"turn {', '.join(map(str, unknown))} is not on this branch "
                             f"(its turns are {min(known, default=0)}-{max(known, default=0)})")
        notes.extend(f"turn {g} stays verbatim: it is protected ({protected[g]})"
                     for g, c in sorted(choices.items()) if c == "summarised" and g in protected)
    if only_groups is not None:
        wanted = set(only_groups)
        choices = {t.group_id: ("summarised" if t.group_id in wanted else "kept") for t in turns}
        target_tokens = max(target_tokens, 0)
    plan: Dispositions = dispositions(turns, summaries, protected, target_tokens, compaction, choices)
    summariser = summariser or extractive_summariser(compaction, tokenizer)
    text, source, cost = ("", SOURCE_EXTRACTIVE, "")
    new_tokens = 0
    groups = [t.group_id for t in plan.summarised]
    if plan.summarised:
        text, source, cost = summariser([t.messages for t in plan.summarised], plan.summary_max_tokens)
        new_tokens = summary_tokens(text, source, groups, tokenizer)
    covered = {g for s in summaries for g in s.group_ids}
    live = [t for t in turns if not t.dropped and t.group_id not in covered]
    earlier = sum(s.tokens_after for s in summaries)
    before = sum(t.tokens for t in live) + earlier
    after = sum(t.tokens for t in live if t.group_id not in set(groups)) + earlier + new_tokens
    if not plan.target_reached and only_groups is None:
        notes.append(f"the target of {target_tokens:,} tokens is not reached: protected, recent and kept turns "
                     f"alone take more")
    if plan.summarised and not text:
        notes.append("the summariser found nothing to keep in these turns")
    elif plan.summarised:
        warning = squeeze_note(plan.summarised, text, new_tokens, compaction.squeeze_warning)
        if warning:
            notes.append(warning)
    return CompactionPreview(
        session_id=session_id, branch_id=branch_id, target_tokens=target_tokens, rows=plan.rows, summary_text=text,
        source=source, tokens_before=before, tokens_after=after, summary_tokens=new_tokens,
        choices=tuple(sorted((choices or {}).items())), cost_note=cost, notes=tuple(notes),
        message_ids=tuple(m.id for t in plan.summarised for m in t.messages), kept_groups=plan.kept_with_summary,
        task_id=task_id)


__all__ = ["Summariser", "build_preview", "extractive_summariser", "summary_tokens"]
