"""Capsules of code for the front ends: build them for an indexed repository, list them, read one.

``CapsuleService.build`` writes a capsule for every module with something to say and every process an
entry point starts (``codegraph.capsules``): missing ones, and stale ones (a covered file changed since),
replaced; fresh ones are kept unless ``rebuild``; capsules whose subject is gone from the index are removed.
Extractive by default (offline, deterministic); with ``use_model`` the configured model writes each text
from the module's cards and the extractive capsule, its call planned, stored and traced like any other
(in a session of their own, ``capsules: ROOT``, that belongs to no repository so the workbench never
reopens it). Each capsule is stored as soon as it is written: an interrupted build keeps what it made.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ctxbench.config import Config
from ctxbench.records.capsules import MODEL_SOURCE_PREFIX, Capsule
from ctxbench.records.errors import NotFound, ProviderError
from ctxbench.records.plans import PlanInputs
from ctxbench.service.workbench import Workbench

SYSTEM_PROMPT = ("You write capsules: short, faithful summaries of a module or a process of a code base, for a coding "
                 "assistant that will navigate it. Say only what the code shows.")
BuildProgress = Callable[[str, int, int], None]  # (subject, done, total)


@dataclass(frozen=True)
class CapsuleBuild:
    """What a build did."""

    repo: str
    written: tuple[Capsule, ...]  # new or refreshed
    kept: int  # fresh capsules left as they were
    removed: int  # capsules whose subject is no longer in the index
    source: str  # extractive | model:NAME
    calls: tuple[str, ...] = ()  # one line per model call (plan id, tokens)

    def to_json(self) -> dict[str, Any]:
        return {"repo": self.repo, "source": self.source, "written": [c.to_json() for c in self.written],
                "kept": self.kept, "removed": self.removed, "calls": list(self.calls)}


class CapsuleService:
    """Capsules of one workbench's indexed repositories."""

    def __init__(self, wb: Workbench, config: Config | None = None) -> None:
        self.wb = wb
        self.config = config or wb.config

    def repos(self) -> tuple[str, ...]:
        return self.wb.capsules.repos()

    def list(self, repo: Path | str | None = None, *, stale: bool | None = None) -> tuple[Capsule, ...]:
        """The capsules of ``repo`` (every repository's when None); ``stale`` filters. Raises NotFound for a
        repository that was never indexed here."""
        root = self._indexed_root(repo) if repo is not None else None
        return self.wb.capsules.list(root, stale=stale)

    def get(self, capsule_id: int) -> Capsule:
        return self.wb.capsules.get(capsule_id)

    def build(self, repo: Path | str, *, use_model: bool = False, rebuild: bool = False, client: Any = None,
              progress: BuildProgress | None = None, cancel: Any = None) -> CapsuleBuild:
        """Write the capsules ``repo`` is missing and refresh its stale ones (all with ``rebuild``)."""
        from ctxbench.codegraph.capsules import extractive_capsules
        from ctxbench.codegraph.index import load_index
        from ctxbench.store import index_tables
        from ctxbench.store.clock import now_iso

        root = self._indexed_root(repo)
        if use_model and client is None and self.config.llm.provider == "offline":
            raise ProviderError("no model is configured ([llm] provider is offline): build extractive capsules "
                                "(without --model), or configure a model")
        with self.wb.connection() as conn:
            index = load_index(root, conn, self.config.index, self.config.capsules)
            state = index_tables.get_repo(conn, root)
            shas = {p: st.sha for p, st in index_tables.file_states(conn, state.id).items()} if state else {}
        existing = {(c.kind, c.subject): c for c in self.wb.capsules.list(root)}
        drafts = extractive_capsules(index, shas, self.config.capsules, now_iso())
        wanted = {(c.kind, c.subject) for c in drafts}
        gone = [c.id for key, c in existing.items() if key not in wanted]
        removed = self.wb.capsules.remove(root, gone) if gone else 0
        todo = [d for d in drafts if rebuild or (d.kind, d.subject) not in existing
                or existing[(d.kind, d.subject)].stale]
        kept = len(drafts) - len(todo)
        writer = _ModelWriter(self.wb, self.config, root, index, client, cancel) if use_model else None
        written: list[Capsule] = []
        for n, draft in enumerate(todo, 1):
            capsule = writer.write(draft) if writer is not None else draft
            written.extend(self.wb.capsules.save([capsule]))
            if progress is not None:
                progress(draft.subject, n, len(todo))
        source = writer.source if writer is not None and writer.source else "extractive"
        return CapsuleBuild(root, tuple(written), kept, removed, source, tuple(writer.calls) if writer else ())

    def _indexed_root(self, repo: Path | str) -> str:
        from ctxbench.codegraph.index import indexed_roots, normalize_root

        root = normalize_root(repo)
        with self.wb.connection() as conn:
            if root not in indexed_roots(conn):
                raise NotFound(f"{root} is not indexed in this database: run `ctxbench index {root}` first")
        return root


class _ModelWriter:
    """Asks the configured model for each capsule's text; every call planned, stored and traced."""

    def __init__(self, wb: Workbench, config: Config, root: str, index: Any, client: Any, cancel: Any) -> None:
        from ctxbench.llm.providers import make_client

        self.wb, self.config, self.index, self.cancel = wb, config, index, cancel
        self.chat = client or make_client(config.llm)
        self.session_id = wb.sessions.create(f"capsules: {root}", None)
        self.calls: list[str] = []
        self.source = ""

    def _material(self, draft: Capsule) -> str:
        """What the model reads: the extractive capsule, then the cards of the covered files, cut to size."""
        limit = self.config.capsules.model_input_chars
        cards = sorted((c for c in self.index.cards.values() if c.path in draft.paths),
                       key=lambda c: (c.path, c.line, c.symbol_id))
        parts = [f"Extractive notes on {draft.title}:\n{draft.text}", "Symbol cards:"]
        used = sum(len(p) for p in parts)
        for card in cards:
            text = card.render(with_excerpt=False)
            if used + len(text) > limit:
                parts.append(f"… {len(cards) - cards.index(card)} more cards left out")
                break
            parts.append(text)
            used += len(text)
        return "\n\n".join(parts)

    def write(self, draft: Capsule) -> Capsule:
        import dataclasses

        from ctxbench.llm.client import CancelToken, ChatRequest, Completed, LLMError
        from ctxbench.planner import build_plan
        from ctxbench.records.messages import Message

        cc = self.config.capsules
        prompt = cc.prompt.format(subject=draft.title, max_tokens=cc.model_reply_tokens)
        query = f"{prompt}\n\n{self._material(draft)}"
        wb = self.wb
        turn = (Message(id=0, session_id=self.session_id, branch_id="", group_id=0, role="user", content=query),)
        budget = max(1, self.config.llm.context_limit - cc.model_reply_tokens)
        inputs = PlanInputs(session_id=self.session_id, query=query, history=(), current_turn=turn, budget=budget,
                            mode="off", strategy="window", system_prompt=SYSTEM_PROMPT, tokenizer=wb.tokenizer.name)
        plan = build_plan(inputs, self.config.planner, wb.tokenizer)
        wb.plans.save(inputs, plan)
        completion = None
        try:
            for event in self.chat.stream(ChatRequest(messages=tuple(plan.messages()), plan=plan,
                                                      max_tokens=cc.model_reply_tokens), self.cancel or CancelToken()):
                if isinstance(event, Completed):
                    completion = event.completion
        except LLMError as exc:
            wb.traces.record_call(plan_id=plan.plan_id, session_id=self.session_id, group_id=0, round=0,
                                  provider=self.chat.provider, model=getattr(self.chat, "model", ""), status="failed",
                                  error=str(exc))
            raise ProviderError(f"the model could not write the capsule of {draft.subject}: {exc}") from exc
        if completion is None or not completion.content.strip():
            raise ProviderError(f"the model's reply for {draft.subject} ended without a capsule")
        reported = completion.usage.prompt_tokens
        wb.plans.record_usage(plan.plan_id, plan.used_tokens, reported, completion.model,
                              completion=completion.usage.completion_tokens,
                              cache_read=completion.usage.cache_read_tokens,
                              cache_write=completion.usage.cache_write_tokens)
        wb.traces.record_call(plan_id=plan.plan_id, session_id=self.session_id, group_id=0, round=0,
                              provider=self.chat.provider, model=completion.model, status="ok",
                              finish_reason=completion.finish_reason)
        self.source = MODEL_SOURCE_PREFIX + completion.model
        self.calls.append(f"{draft.subject}: plan {plan.plan_id}, "
                          f"{reported if reported is not None else plan.used_tokens:,} prompt tokens"
                          f"{'' if reported is not None else ' (estimated)'}")
        return dataclasses.replace(draft, text=completion.content.strip(), source=self.source,
                                   confidence=cc.model_confidence)


def capsule_view(capsule: Capsule) -> str:
    """A capsule in full, as the CLI's ``--show`` and the workbench's preview give it."""
    lines = [f"{capsule.label} · {capsule.title} · {capsule.source} · confidence {capsule.confidence:.2f} · "
             f"generated {capsule.generated_at}"]
    if capsule.stale:
        lines.append(f"STALE since {capsule.stale_at}: {capsule.stale_note()} — not ground truth; check the code")
    else:
        lines.append("fresh: every covered file is as it was when the capsule was written (a retrieval aid, "
                     "not ground truth)")
    lines.append("covers: " + ", ".join(f"{p} ({h[:12]}){' ← changed' if p in capsule.stale_files else ''}"
                                        for p, h in capsule.files))
    lines += ["", capsule.text]
    return "\n".join(lines)

