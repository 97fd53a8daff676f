"""One policy, set once, with a real client: Claude Code (``claude -p``) through a steering ``ctxbench proxy``
to the scripted upstream, with the policy dropping its skills list (a section of the system message it puts
among the messages) and pinning a text. The upstream receives exactly Claude Code's request without the skills
list and with the pin — the expected body worked out here from the request as Claude Code sent it — and Claude
Code still prints the reply."""
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
RULE_TEXT = "Money is rounded half up, to the cent."


def _expected(original: dict, block: str) -> dict:
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


def test_claude_code_gets_a_policy_drop_of_its_skills_list_and_a_pin_and_still_answers(tmp_path):
    with proxied(tmp_path, [Turn(text=REPLY)] * 4, steer=True) as (up, wb, proxy):
        add_rule(wb, "drop", "kind:skill_list")
        rule = pin_text(wb, RULE_TEXT, "rounding")
        result = driver("claude", tmp_path).ask(proxy.url, QUESTION)
        assert result.returncode == 0 and REPLY in result.stdout, shown(result, up.calls())
        found = asking(wb, QUESTION)
        assert found, f"no stored exchange carries the question; upstream calls: {up.calls()}"
        _info, exchange = found[-1]
        original, upstream = wb.proxy.bodies(exchange.id)
        (received,) = [s for s in up.chats() if QUESTION.encode() in s.body]
        assert exchange.steered and as_stored(received.body, upstream)
        block = f"[pinned by the user in ctxbench: {rule.label}]\n{RULE_TEXT}"
        assert same_but_masked(json.loads(received.body), _expected(json.loads(original), block))
        assert SKILLS.encode() in original and SKILLS.encode() not in received.body
        assert len(exchange.changes) == 2, exchange.changes  # the skills list left out, the pin added
