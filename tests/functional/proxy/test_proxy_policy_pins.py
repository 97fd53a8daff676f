"""Pins set once in the policy, in every wire format: a pinned text is in every proxied request of every
client, and a pinned file comes back after the client compacts its history (Claude Code's /compact, Codex's:
the next request holds a summary instead of the history). The upstream receives exactly what the client sent
plus the pin in the system prompt — byte for byte, each expected body built here — and, while the client
still sends the pinned file itself, exactly what the client sent."""
from __future__ import annotations

import copy

import pytest
from test_proxy import proxied, settled
from test_proxy_policy_drops import FORMATS, post, wire
from test_proxy_prices import _watch
from upstream_server import Answer

from ctxbench.service.proxy.policy import pin_text

SYSTEM = "You are a careful coding assistant."
FILE = "app/config.py\n```python\nRATE = 0.07\n```\nremember this file"
SUMMARY = "\n".join(f"- step {n}: we changed the rate handling in app/config.py and checked it" for n in range(6))
PINNED = "[pinned by the user in ctxbench: {label}]\n{content}"  # the block a pin adds, as the docs describe it


def message(fmt: str, role: str, text: str) -> dict:
    if fmt == "anthropic":
        return {"role": role, "content": [{"type": "text", "text": text}]}
    if fmt == "openai":
        return {"role": role, "content": text}
    if fmt == "responses":
        kind = "input_text" if role == "user" else "output_text"
        return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}
    return {"role": "model" if role == "assistant" else role, "parts": [{"text": text}]}


def request(fmt: str, turns: list[tuple[str, str]]) -> dict:
    talk = [message(fmt, role, text) for role, text in turns]
    if fmt == "anthropic":
        return {"model": "claude-house", "max_tokens": 100, "system": SYSTEM, "messages": talk}
    if fmt == "openai":
        return {"model": "gpt-4o", "messages": [{"role": "system", "content": SYSTEM}, *talk]}
    if fmt == "responses":
        return {"model": "gpt-5-codex", "instructions": SYSTEM, "input": talk}
    return {"systemInstruction": {"parts": [{"text": SYSTEM}]}, "contents": talk}


def with_pin(fmt: str, body: dict, block: str) -> dict:
    """``body`` with ``block`` at the end of its system prompt, where each wire format keeps it."""
    out = copy.deepcopy(body)
    if fmt == "anthropic":
        out["system"] = f"{out['system']}\n\n{block}"
    elif fmt == "openai":
        out["messages"][0]["content"] = f"{out['messages'][0]['content']}\n\n{block}"
    elif fmt == "responses":
        out["instructions"] = f"{out['instructions']}\n\n{block}"
    else:
        out["systemInstruction"]["parts"].append({"text": block})
    return out


def test_a_pinned_text_is_in_every_request_of_every_client(tmp_path):
    with proxied(tmp_path, steer=True) as (up, wb, proxy):
        rule = pin_text(wb, "Money is rounded half up, to the cent.", "rounding")
        block = PINNED.format(label="rounding", content="Money is rounded half up, to the cent.")
        for n, fmt in enumerate(FORMATS):
            body = request(fmt, [("user", "hello")])
            post(proxy, fmt, body)
            assert up.seen[n].body == wire(with_pin(fmt, body, block)), fmt
        assert rule.describe().startswith(f"#{rule.n} pin rounding")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_policy_pin_comes_back_exactly_after_the_client_compacts(tmp_path, fmt):
    with proxied(tmp_path, [Answer(), Answer(text=SUMMARY), Answer()], steer=True) as (up, wb, proxy):
        first = [("user", FILE)]
        post(proxy, fmt, request(fmt, first))
        (exchange,) = settled(wb)
        session = exchange.session_id
        plan = wb.plans.get(exchange.plan_id)
        (file_item,) = [i for i in plan.items if i.kind == "attached_file"]
        said = _watch(wb, session).everywhere("pin", file_item.id, plan)
        assert said.startswith("#1 pin file app/config.py")
        (rule,) = wb.proxy_policy.rules()
        assert "RATE = 0.07" in rule.content

        # the client still sends the file: the request goes up exactly as sent
        before = post(proxy, fmt, request(fmt, [*first, ("assistant", "Hello from upstream."),
                                                ("user", "summarise what we did")]))
        assert up.seen[1].body == before and b"RATE = 0.07" in before

        # the client compacts: its history is a summary now, the file is gone from it; the pin comes back
        compacted = request(fmt, [("user", f"Summary of the conversation so far:\n{SUMMARY}"),
                                  ("assistant", "Understood."), ("user", "now raise the rate to 0.08")])
        post(proxy, fmt, compacted)
        block = PINNED.format(label=rule.label, content=rule.content)
        assert up.seen[2].body == wire(with_pin(fmt, compacted, block))
        last = settled(wb, session)[-1]
        assert last.session_id == session and len(settled(wb, session)) == 3  # the same conversation
        (change,) = last.changes
        assert change.startswith("added pin path:app/config.py") and "the request no longer carries it" in change
