"""Counts that match the bill: tiktoken is not the model's tokenizer, so each model's counts are calibrated
from what the provider reported for earlier requests (their billed usage, or count_tokens answers where the
upstream offers them); calibrated item counts sum to the billed prompt (input plus cache tokens) within 2%."""
from __future__ import annotations

import json

from test_proxy import anthropic_client, conversation, openai_client, proxied, settled
from test_proxy_prices import _watch
from upstream_server import Answer

from ctxbench.service.proxy.calibration import calibrated, calibrated_items, calibration_for
from ctxbench.tokens import get_tokenizer

TOK = get_tokenizer()


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() if k not in ("model", "role", "type") for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def other_tokenizer(payload: dict) -> int:
    """A provider whose tokenizer makes 1.8 tokens of every cl100k token of the request's texts, plus 5 a message."""
    texts = [s for key in ("messages", "system", "tools") for s in _strings(payload.get(key))]
    return round(1.8 * sum(TOK.count(t) for t in texts)) + 5 * len(payload.get("messages") or ())


def _within(total: int, billed: int, share: float) -> bool:
    return abs(total - billed) <= share * billed


def test_counts_calibrated_from_billed_usage_sum_to_the_next_bill_within_two_percent(tmp_path):
    with proxied(tmp_path, [Answer(prompt_of=other_tokenizer)]) as (up, wb, proxy):
        client = openai_client(proxy)
        messages = conversation(2, result_chars=800)
        client.chat.completions.create(model="house-model", messages=messages)
        first = settled(wb)[0]
        assert calibration_for(wb, "house-model", before=first.id) is None  # nothing to calibrate from yet
        messages += [{"role": "assistant", "content": "Hello from upstream."},
                     {"role": "user", "content": "and the tests? what do they check in module_2.py, and why?"}]
        client.chat.completions.create(model="house-model", messages=messages)
        _first, second = settled(wb, first.session_id)
        calibration = calibration_for(wb, "house-model", before=second.id)
        assert calibration.source == "billed usage" and calibration.samples == 1
        plan = wb.plans.get(second.plan_id)
        items = calibrated_items(plan, calibration)
        billed = other_tokenizer(json.loads(up.seen[1].body))
        assert wb.proxy_billing.usage(second.id).prompt == billed
        assert _within(sum(items.values()), billed, 0.02)
        assert not _within(plan.used_tokens, billed, 0.02)  # the uncalibrated count is far off
        line = _watch(wb, first.session_id).poll().counts
        assert line.startswith("token counts calibrated for house-model: ×") and "from 1 billed request:" in line
        assert f"items {sum(items.values()):,} tok" in line and f"billed {billed:,}" in line


def test_a_count_tokens_answer_calibrates_the_counts_of_the_first_request(tmp_path):
    with proxied(tmp_path, [Answer(prompt_of=other_tokenizer)]) as (up, wb, proxy):
        client = anthropic_client(proxy)
        kwargs = {"model": "claude-house", "system": "You are a careful coding assistant. " * 10,
                  "messages": [{"role": "user", "content": "what does module_1.py do? " + "it reads files. " * 40}]}
        counted = client.messages.count_tokens(**kwargs)
        assert counted.input_tokens == other_tokenizer(json.loads(up.seen[0].body))
        assert wb.proxy.latest_session() is None  # a count is not a conversation
        client.messages.create(max_tokens=100, **kwargs)
        (exchange,) = settled(wb)
        calibration = calibration_for(wb, "claude-house", before=exchange.id)
        assert calibration.source == "count_tokens" and calibration.samples == 1
        items = calibrated_items(wb.plans.get(exchange.plan_id), calibration)
        assert _within(sum(items.values()), wb.proxy_billing.usage(exchange.id).prompt, 0.02)
        line = _watch(wb, exchange.session_id).poll().counts
        assert "from 1 count_tokens answer" in line


def test_calibrated_counts_sum_to_the_calibrated_total():
    counts = calibrated([("a", 7), ("b", 11), ("c", 13)], 1.37)
    assert sum(counts.values()) == round(31 * 1.37)
    assert all(abs(counts[k] - t * 1.37) < 1 for k, t in (("a", 7), ("b", 11), ("c", 13)))


def test_an_uncalibrated_model_says_its_counts_are_tiktoken(tmp_path):
    with proxied(tmp_path) as (up, wb, proxy):
        openai_client(proxy).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        (exchange,) = settled(wb)
        assert _watch(wb, exchange.session_id).poll().counts.endswith("not calibrated for m yet")


def test_the_items_count_every_token_of_the_request_as_sent(tmp_path):
    """What calibration scales is every token sent: a system message inside an Anthropic request's messages (as
    Claude Code sends its instructions now) is an item too, so the items sum to the request's cache blocks."""
    from test_proxy_anatomy import claude_code_body

    from ctxbench.service.proxy.cache_view import cache_blocks
    from ctxbench.service.proxy.wire import parse_request

    body = dict(claude_code_body(), max_tokens=100)
    body["messages"] = [body["messages"][0], {"role": "system", "content": "Instructions. " * 300},
                        {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "go on"}]
    with proxied(tmp_path) as (up, wb, proxy):
        anthropic_client(proxy).messages.create(**{k: v for k, v in body.items() if k != "stream"})
        (exchange,) = settled(wb)
        plan = wb.plans.get(exchange.plan_id)
        sent = parse_request("anthropic", up.seen[0].body, TOK)
        assert plan.used_tokens == sum(t for _h, t in cache_blocks(sent))
        # an item of its own (Claude Code's scaffolding kinds), not folded into a turn and not left out
        (inside,) = [i for i in plan.included if "Instructions." in i.label]
        assert inside.tokens > 300 and inside.kind not in ("history_atom", "current_turn")
