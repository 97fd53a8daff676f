"""One policy, set once, with the real clients through a steering ``ctxbench proxy`` to the scripted upstream:
Claude Code (``claude -p``) with its skills list (a section of the system message it puts among the messages)
dropped, Codex (``codex exec``) with its environment context (an input message of its own) dropped, and a text
pinned for both. The upstream receives exactly the client's request without the dropped item and with the pin
— the expected body worked out here from the request as the client sent it — and the client still prints the
reply."""
from __future__ import annotations

import copy
import json

import pytest
from assistant_upstream import Turn
from test_real_clients import QUESTION, REPLY, as_stored, asking, driver, proxied, same_but_masked
from client_drivers import shown

from ctxbench.service.proxy.policy import add_rule, pin_text

pytestmark = pytest.mark.slow
SKILLS = "The following skills are available"
AFTER_SKILLS = "Today's date is"  # the section Claude Code sends after its skills list
CODEX_ENV = "<environment_context>"
RULE_TEXT = "Money is rounded half up, to the cent."


def _claude_expected(original: dict, block: str) -> dict:
    """Claude Code's request without the skills list section and with the pinned block as a system block of its
    own: cut here by the section's own words, not by the proxy's anatomy."""
    out = copy.deepcopy(original)
    cut = 0
    for m in out["messages"]:
        blocks = m["content"] if isinstance(m["content"], list) else []
        for b in blocks:
            text = b.get("text", "")
            if m["role"] == "system" and SKILLS in text:
                start = text.index(SKILLS)
                b["text"] = text[:start] + text[text.index(AFTER_SKILLS, start):]
                cut += 1
    assert cut == 1, "Claude Code sent no skills list among its messages"
    out["system"].append({"type": "text", "text": block})
    return out


def _codex_expected(original: dict, block: str) -> dict:
    """Codex's request without its environment context message and with the pin in its instructions."""
    out = copy.deepcopy(original)
    kept = [i for i in out["input"] if not (i.get("type") == "message" and any(
        str(c.get("text", "")).startswith(CODEX_ENV) for c in i.get("content") or ()))]
    assert len(kept) == len(out["input"]) - 1, "Codex sent no environment context message"
    out["input"] = kept
    out["instructions"] = f"{out['instructions']}\n\n{block}" if out.get("instructions") else block
    return out


CASES = {"claude": ("kind:skill_list", SKILLS, _claude_expected),
         "codex": ("kind:environment", CODEX_ENV, _codex_expected)}


@pytest.mark.parametrize("client", list(CASES))
def test_a_real_client_gets_a_policy_drop_of_its_scaffolding_and_a_pin_and_still_answers(tmp_path, client):
    rule_target, dropped, expected = CASES[client]
    with proxied(tmp_path, [Turn(text=REPLY)] * 4, steer=True) as (up, wb, proxy):
        add_rule(wb, "drop", rule_target)
        rule = pin_text(wb, RULE_TEXT, "rounding")
        result = driver(client, tmp_path).ask(proxy.url, QUESTION)
        assert result.returncode == 0 and REPLY in result.stdout, shown(result, up.calls())
        found = asking(wb, QUESTION)
        assert found, f"no stored exchange carries the question; upstream calls: {up.calls()}"
        _info, exchange = found[-1]
        original, upstream = wb.proxy.bodies(exchange.id)
        (received,) = [s for s in up.chats() if QUESTION.encode() in s.body]
        assert exchange.steered and as_stored(received.body, upstream)
        block = f"[pinned by the user in ctxbench: {rule.label}]\n{RULE_TEXT}"
        assert same_but_masked(json.loads(received.body), expected(json.loads(original), block))
        assert dropped.encode() in original and dropped.encode() not in received.body
        assert len(exchange.changes) == 2, exchange.changes  # the item left out, the pin added
