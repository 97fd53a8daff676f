"""Compaction (seed 004): previews of what summarising history would do, and the extractive summariser.

``build_preview`` is the whole engine of ``/compact`` and ``ctxbench compact``: it reads nothing and writes
nothing; the service hands it the branch's history, pins, summaries and open task, and stores the result
only when the user applies it. Engine module: never imports textual or rich.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from ctxbench.compaction import extractive
from ctxbench.compaction.preview import Dispositions, dispositions, protections, turns_of
from ctxbench.config import Config
from ctxbench.planner.render import summary_message
from ctxbench.records.compaction import SOURCE_EXTRACTIVE, CompactionPreview, Summary, Task
from ctxbench.records.messages import Message
from ctxbench.records.plans import Pin
from ctxbench.tokens import Tokenizer, count_message

# (turns to summarise, each its active messages; the summary's token limit) -> (text, source, cost note)
Summariser = Callable[[Sequence[Sequence[Message]], int], tuple[str, str, str]]


def extractive_summariser(config: Config, tokenizer: Tokenizer, encode: extractive.Encode | None = None) -> Summariser:
    def run(groups: Sequence[Sequence[Message]], max_tokens: int) -> tuple[str, str, str]:
        return extractive.summarise(groups, max_tokens, tokenizer, config.compaction, encode), SOURCE_EXTRACTIVE, ""

    return run


def summary_tokens(text: str, source: str, group_ids: Sequence[int], tokenizer: Tokenizer) -> int:
    """Tokens of a summary as the planner sends it (its header included)."""
    probe = Summary(0, "", "", tuple(group_ids), (), text, source, 0, 0, "")
    return count_message(tokenizer, summary_message(probe))


def build_preview(*, session_id: str, branch_id: str, history: Sequence[Message], pins: Sequence[Pin],
                  summaries: Sequence[Summary], task: Task | None, target_tokens: int, config: Config,
                  tokenizer: Tokenizer, choices: Mapping[int, str] | None = None,
                  summariser: Summariser | None = None, only_groups: Sequence[int] | None = None,
                  task_id: int = 0) -> CompactionPreview:
    """What compacting ``history`` (the active branch's, active and dropped messages) to ``target_tokens``
    would do. ``only_groups``: summarise exactly these turns (a finished task's) and keep the rest."""
    turns = turns_of(history)
    protected = protections(turns, pins, task, config.planner.levels)
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
    plan: Dispositions = dispositions(turns, summaries, protected, target_tokens, config.compaction, choices)
    summariser = summariser or extractive_summariser(config, tokenizer)
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
    return CompactionPreview(
        session_id=session_id, branch_id=branch_id, target_tokens=target_tokens, rows=plan.rows, summary_text=text,
        source=source, tokens_before=before, tokens_after=after, summary_tokens=new_tokens,
        choices=tuple(sorted((choices or {}).items())), cost_note=cost, notes=tuple(notes),
        message_ids=tuple(m.id for t in plan.summarised for m in t.messages), kept_groups=plan.kept_with_summary,
        task_id=task_id)


__all__ = ["Summariser", "build_preview", "extractive_summariser", "summary_tokens"]
