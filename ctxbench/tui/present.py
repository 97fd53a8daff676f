"""How plans and messages read on screen: pure functions, no widgets, easy to test."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.config import DEFAULT_MODES
from ctxbench.records.turns import cost_text, turn_cost

CANCELLED_EARLY = "⊘ cancelled before the model replied (your message is stored)"  # a turn's note
AUTO_SECTIONS = ("retrieval", "scaffold")  # what the Context Mode adds on its own
MODE_LABELS = {"off": "Off", "light": "Light", "heavy": "Heavy", "": "no mode"}  # "": a proxied plan no mode shaped
BUILTIN_MODE_CYCLE = tuple(m.name for m in DEFAULT_MODES)  # the config's modes, in order, are the real cycle


def tok(n: int) -> str:
    return f"{n:,}"


def mode_label(mode: str) -> str:
    return MODE_LABELS.get(mode, mode.capitalize())


def next_mode(mode: str, cycle: tuple[str, ...] = BUILTIN_MODE_CYCLE) -> str:
    """The mode after ``mode`` in ``cycle`` (Off → Light → Heavy → Off by default); unknown → first."""
    if mode not in cycle:
        return cycle[0]
    return cycle[(cycle.index(mode) + 1) % len(cycle)]


@dataclass(frozen=True)
class Attachment:
    """The line under a user message: what the Context Mode auto-included and what it cost."""

    tokens: int
    mode: str
    parts: tuple[str, ...]
    over_budget: bool = False

    def text(self, details_key: str = "ctrl+o") -> str:
        what = " + ".join(self.parts) if self.parts else ("nothing auto-included" if self.mode != "off" else "no auto context")
        head = f"+{tok(self.tokens)} tok auto · {mode_label(self.mode)} · {what}"
        if self.over_budget:
            head = "⚠ over budget · " + head
        return f"{head} · {details_key} details"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def attachment_for(plan) -> Attachment:
    auto = [i for i in plan.included if i.section in AUTO_SECTIONS]
    tokens = sum(i.tokens for i in auto)
    parts: list[str] = []
    if any(i.kind == "scaffold" for i in auto):
        parts.append("scaffold")
    cards = sum(1 for i in auto if i.kind == "symbol_card")
    if cards:
        parts.append(_plural(cards, "card"))
    others = len(auto) - cards - sum(1 for i in auto if i.kind == "scaffold")
    if others:
        parts.append(_plural(others, "item"))
    leased = [i for i in plan.included if i.pin == "leased"]
    if leased:
        parts.append(_plural(len(leased), "leased pin"))
        tokens += sum(i.tokens for i in leased)
    return Attachment(tokens, plan.mode, tuple(parts), bool(plan.over_budget))


def one_line(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


# -- ### STATE blocks ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReplyParts:
    """An assistant reply split around its ``### STATE`` block (shown as a panel with its lines kept)."""

    before: str
    state: str  # the block without its heading line; "" when the reply has none
    after: str = ""


def split_state(text: str) -> ReplyParts:
    from ctxbench.records.state import state_span

    span = state_span(text)
    if span is None:
        return ReplyParts(text, "")
    start, end = span
    block = text[start:end]
    body = block.split("\n", 1)[1] if "\n" in block else ""
    return ReplyParts(text[:start].rstrip(), body.strip("\n"), text[end:].strip("\n"))


def state_line_parts(line: str) -> tuple[str, str]:
    """``Goal: x`` → (``Goal:``, `` x``); a line without a field name → ("", line)."""
    head, sep, rest = line.partition(":")
    name = head.strip().lstrip("-* ")
    if sep and name and len(name) <= 40 and all(c.isalpha() or c == " " for c in name):
        return head + sep, rest
    return "", line


# -- usage reports ---------------------------------------------------------------------------------

def usage_text(checks) -> tuple[str, bool]:
    """The line under a reply: estimated vs reported prompt tokens of the turn's last call (with the cache reads and
    writes it reported), and whether any call differed by more than the threshold (the badge)."""
    checks = tuple(checks)
    if not checks:
        return "", False
    last = checks[-1]
    bad = next((c for c in reversed(checks) if c.mismatch), None)
    cost = turn_cost(checks)
    calls = f" · {len(checks)} calls" if len(checks) > 1 else ""
    calls += f" · {cost_text(cost)}" if cost is not None else ""  # only where the model's price is known
    model = f" · {last.model}" if last.model else ""
    cache = f" · {last.cache_text}" if last.cache_text else ""  # as the provider reported them
    if bad is not None:
        return f"⚠ {bad.badge} — estimate off by more than the threshold{cache}{calls}{model}", True
    if last.reported is None:
        return f"est {tok(last.estimated)} prompt tok · no usage reported{calls}{model}", False
    return f"est {tok(last.estimated)} · reported {tok(last.reported)} prompt tok{cache}{calls}{model}", False


def over_budget_notice(plan) -> str:
    """What the workbench says when a plan's mandatory items alone exceed its budget: such a turn is refused."""
    return (f"{plan.over_budget_reason}. A message is not sent until the budget is at least "
            f"{tok(plan.used_tokens)} (/budget N).")


def model_label(llm) -> str:
    """Short name of the model for the status line: ``offline model`` or ``NAME @ host:port``."""
    if llm is None or llm.provider == "offline":
        return "offline model"
    default = "api.anthropic.com" if llm.provider == "anthropic" else "api.openai.com"
    return f"{llm.model} @ {_host(llm.base_url or default)}"


def _host(url: str) -> str:
    """The host[:port] of ``url`` (its scheme and path left off)."""
    for prefix in ("http://", "https://"):
        url = url.removeprefix(prefix)
    return url.split("/", 1)[0]


def proxied_label(model: str, provider: str, upstream: str) -> str:
    """The model of a proxied conversation for the status line: the model the client asked for (or its provider
    while no request has come) and the upstream the proxy forwards to (``claude-sonnet-4 via proxy → host``)."""
    where = _host(upstream)
    who = model or (f"{provider} model" if provider else "the client's model")
    return f"{who} via proxy" + (f" → {where}" if where else "")


def status_model(config, watching: bool) -> str:
    """The model the status line names: the configured one, or a followed proxied conversation's."""
    return proxied_label("", "", config.proxy.upstream) if watching else model_label(config.llm)


# -- the status line and first words ---------------------------------------------------------------

def status_detail(settings, repo_name: str, title: str, model: str, branch: str = "", task: str = "") -> str:
    """``repo · ⎇ branch · ▸ task · strategy · window · model`` after the session's title (the repository only
    when the title does not already name it)."""
    parts = []
    if repo_name and repo_name not in title:
        parts.append(repo_name)
    if branch:
        parts.append(f"⎇ {branch}")
    if task:
        parts.append(f"▸ {task}")
    if settings is not None:
        parts.append(settings.strategy)
        parts.append("all turns" if not settings.window_groups else f"last {settings.window_groups} turns")
    parts.append(model)
    return " · ".join(parts)


def cluster_label(tag) -> str:
    """`` · cluster q3: 4 queries`` or `` · cluster q4: new, started by this turn`` for the overlay's title ("" when
    the plan's query was not clustered: no semantic search, a mode that does not retrieve)."""
    if tag is None:
        return ""
    words = "new, started by this turn" if tag.started else f"{tag.queries} queries"
    return " · " + f"cluster q{tag.id}: {words}".replace(" ", "\u00a0")  # no-break spaces: wraps as one phrase


def diff_line(diff, group_id: int | None) -> str:
    """The line under a turn's attachment line: what changed since the previous turn's plan, with a link to
    the whole diff ("" when there is nothing to compare with)."""
    if diff is None or group_id is None:
        return ""
    return f"\nΔ since the previous turn: {diff.summary} · [@click=screen.open_diff({group_id})]diff[/]"


def new_session_note(keymap: dict[str, str]) -> str:
    from ctxbench.tui.keymap import describe_key

    return (f"A new session. Type a message and press Enter. "
            f"{describe_key('ctxbench.mode_cycle', keymap)} cycles the Context Mode (Off → Light → Heavy), "
            f"{describe_key('ctxbench.overlay', keymap)} shows every candidate and why, "
            f"/help lists the commands.")


# -- the payload --------------------------------------------------------------------------------

def payload_view(plan, as_json: bool = False) -> tuple[str, str, str, str]:
    """The exact ``messages`` of a plan for the viewer: (title, body, language, subtitle)."""
    import json

    from ctxbench.service.text import render_messages

    payload = plan.messages()
    subtitle = (f"{len(payload)} messages · {tok(plan.used_tokens)} / {tok(plan.budget)} tok · "
                f"{mode_label(plan.mode)} · {plan.strategy}{compaction_line(plan)} · esc closes")
    if as_json:
        return f"Payload of {plan.plan_id} (JSON)", json.dumps(payload, indent=2, ensure_ascii=False), "json", subtitle
    return f"Payload of {plan.plan_id}", render_messages(payload), "text", subtitle


def compaction_line(plan) -> str:
    """`` · 1 summary: 1.4k tok for 52.1k (36.5×), 50.7k saved`` (seed 004's metrics); "" without summaries."""
    from ctxbench.records.compaction import compaction_metrics

    m = compaction_metrics(plan)
    if not m.summaries:
        return ""
    return (f" · {m.summaries} summar{'y' if m.summaries == 1 else 'ies'}: {tok(m.summary_tokens)} tok for "
            f"{tok(m.covered_tokens)} ({m.ratio:.1f}×), {tok(m.tokens_saved)} saved")
