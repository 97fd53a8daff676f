"""The assistant's scaffolding in a read request: reminder blocks split from the user's words, and system
messages, few-shot examples and acknowledgements marked by kind (the kinds are :mod:`service.proxy.anatomy`'s)."""
from __future__ import annotations

from dataclasses import replace

from ctxbench.records.proxy import WireMessage, WirePart
from ctxbench.service.proxy import anatomy
from ctxbench.tokens import TOKENS_PER_MESSAGE, Tokenizer


def _pieces(p: WirePart, pieces: list[tuple[int, int, str]], tok: Tokenizer) -> list[WirePart]:
    """The part ``p`` split into its ``pieces``, each with its kind."""
    if len(pieces) == 1:
        return [replace(p, scaffold=pieces[0][2])]
    return [replace(p, text=p.text[start:end], tokens=tok.count(p.text[start:end]), scaffold=kind,
                    segment=(start, end), replaceable=False, label="") for start, end, kind in pieces]


def mark_scaffolding(messages: tuple[WireMessage, ...], tok: Tokenizer, system_texts: tuple[str, ...] = (), *,
                     system_scaffold: bool = False) -> tuple[WireMessage, ...]:
    """``messages`` with reminder blocks split from the user's words and scaffolding marked by kind: a reminder
    that repeats the end of ``system_texts`` at the end of a user's text is one; with ``system_scaffold``, a
    system message among the messages is scaffolding, split into its sections."""
    out: list[WireMessage] = []
    for m in messages:
        if m.role in ("system", "developer"):
            if system_scaffold:
                split = [q for p in m.parts for q in (
                    _pieces(p, anatomy.system_segments(p.text), tok) if p.kind == "text" and p.segment is None
                    else [replace(p, scaffold=p.scaffold or anatomy.REMINDER)])]
                m = replace(m, parts=tuple(split), tokens=TOKENS_PER_MESSAGE + sum(p.tokens for p in split),
                            scaffold=split[0].scaffold if split else anatomy.REMINDER)
            out.append(m)
            continue
        parts: list[WirePart] = []
        for p in m.parts:
            if p.kind != "text" or p.segment is not None:
                parts.append(p)
                continue
            pieces = anatomy.segments(p.text, system_texts if m.role == "user" else ())
            if len(pieces) == 1:
                kind = pieces[0][2] or (anatomy.text_kind(p.text) if m.role == "user" else "")
                parts.append(replace(p, scaffold=kind) if kind else p)
                continue
            for start, end, kind in pieces:
                text = p.text[start:end]
                parts.append(replace(p, text=text, tokens=tok.count(text), scaffold=kind, segment=(start, end),
                                     replaceable=False, label=""))
        tokens = TOKENS_PER_MESSAGE + sum(p.tokens for p in parts)
        whole = ""
        if m.role == "user" and parts and all(p.kind == "text" and p.scaffold for p in parts):
            whole = parts[0].scaffold
        elif m.role == "assistant" and out and out[-1].scaffold and out[-1].role == "user" and anatomy.announced_kind(
                "".join(p.text for p in out[-1].parts)) and parts and all(p.kind == "text" for p in parts) \
                and anatomy.is_ack("".join(p.text for p in parts)):
            whole = out[-1].scaffold  # "Ok." after the fixed-wording scaffolding it acknowledges
        out.append(replace(m, parts=tuple(parts), tokens=tokens, scaffold=whole))
    talk = [(n, m) for n, m in enumerate(out) if m.role not in ("system", "developer")]
    examples = anatomy.few_shot_end([(m.role, "".join(p.text for p in m.parts if p.kind == "text")) for _n, m in talk])
    for n, _m in talk[:examples]:
        out[n] = replace(out[n], scaffold=anatomy.FEW_SHOT)
    return tuple(out)
