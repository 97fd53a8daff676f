"""Listings the slash commands show in the viewer: the session's turns and its tasks."""
from __future__ import annotations


def window_status(messages, sent_ids, summarised_ids) -> str:
    """Where a turn stands in the current plan: ``in`` (every message sent), ``part`` (some, e.g. single messages
    picked, an old tool result left out), ``out`` (none), ``summary`` (a summary stands in for it), ``dropped``
    (by the user); ``?`` before the first plan (``sent_ids`` None). ``sent_ids`` / ``summarised_ids``: the
    message ids the plan sends / leaves out as summarised."""
    if any(m.status == "dropped" for m in messages):
        return "dropped"
    if sent_ids is None:
        return "?"
    ids = {m.id for m in messages}
    sent = sent_ids & ids
    if sent:
        return "in" if sent == ids else "part"
    return "summary" if ids & summarised_ids else "out"


def message_listing(messages, limit: int = 0, plan=None) -> str:
    """``/message list``: one line per turn with where it stands in the current plan (``window_status``), its
    size and first words."""
    groups: dict[int, list] = {}
    for m in messages:
        groups.setdefault(m.group_id, []).append(m)
    items = list(groups.items())
    if limit:
        items = items[-limit:]
    sent_ids = summarised_ids = None
    if plan is not None:  # the plan's message ids once, not once per turn
        sent_ids = {mid for item in plan.included for mid in item.message_ids}
        summarised_ids = {mid for i in plan.items if not i.included and i.reason == "summarised"
                          for mid in i.message_ids}
    lines = []
    for gid, ms in items:
        status = window_status(ms, sent_ids, summarised_ids)
        tokens = sum(m.tokens for m in ms)
        first = next((m for m in ms if m.role in ("user", "system")), ms[0])
        words = " ".join(first.content.split())[:70]
        tools = sum(1 for m in ms if m.role == "tool")
        extra = f" +{tools} tool" if tools else ""
        lines.append(f"{gid:>5}  {status:<7} {len(ms):>3} msg{extra:<9} {tokens:>7,} tok  {first.role}: {words}")
    return "\n".join(lines) or "no turns yet"


def task_listing(tasks) -> str:
    """``/task``: one line per task of the branch, the open one marked."""
    lines = []
    for t in tasks:
        span = f"turns {t.started_group}–{t.ended_group}" if t.ended_group is not None else f"from turn {t.started_group}"
        mark = "*" if t.open else " "
        lines.append(f"{mark} t{t.id:<4} {t.name:<40} {span:<18} opened by {t.opened_by}")
    return "\n".join(lines) or "no tasks yet: /task start NAME opens one (a STATE block's Goal opens one too)"
