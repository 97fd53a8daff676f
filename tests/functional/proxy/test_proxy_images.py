"""An image in a proxied request is an item of kind ``image``, counted as its provider bills it (Anthropic by its
pixels, OpenAI by 512-px tiles and its ``detail``, Gemini by 768-px tiles), from the size in the image's own
header, never as text; its label says the size and the rule, an image of unknown size is marked as an estimate,
and every byte of the request still belongs to exactly one item. Through a real proxy on loopback to a scripted
upstream, for each wire format."""
from __future__ import annotations

from image_bytes import b64, data_url, gif, jpeg, png, webp_lossy
from test_proxy import proxied
from test_proxy_anatomy import only_plan, post
from upstream_server import Answer

from ctxbench.service.proxy.images import anthropic_count, gemini_count, image_count, openai_count
from ctxbench.tokens import get_tokenizer

TOK = get_tokenizer()

QUESTION = "what is different between these pictures?"
GEMINI_PATH = "/v1beta/models/gemini-2.5-flash:generateContent"


def image_bodies() -> list[tuple[str, str, dict, list]]:
    """(provider, path, body, the counts of its images in order) for each wire format."""
    return [
        ("anthropic", "/v1/messages", {"model": "claude-scripted", "max_tokens": 100, "messages": [
            {"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(png(3000, 2000))}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/ant.jpg"}},
                {"type": "text", "text": QUESTION}]}]},
         [anthropic_count(3000, 2000), image_count("anthropic", None)]),
        ("openai", "/v1/chat/completions", {"model": "gpt-4o", "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": QUESTION},
                {"type": "image_url", "image_url": {"url": data_url(jpeg(2048, 4096), "image/jpeg"), "detail": "high"}},
                {"type": "image_url", "image_url": {"url": data_url(gif(640, 480), "image/gif"), "detail": "low"}}]}]},
         [openai_count(2048, 4096, "high"), openai_count(640, 480, "low")]),
        ("responses", "/v1/responses", {"model": "gpt-5-codex", "input": [
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": QUESTION},
                {"type": "input_image", "image_url": data_url(webp_lossy(1024, 1024), "image/webp"), "detail": "auto"},
                {"type": "input_image", "file_id": "file-abc123"}]}]},
         [openai_count(1024, 1024, "auto"), image_count("responses", None)]),
        ("gemini", GEMINI_PATH, {"contents": [
            {"role": "user", "parts": [
                {"text": QUESTION}, {"inlineData": {"mimeType": "image/png", "data": b64(png(1000, 500))}},
                {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/v1beta/files/abc"}}]}]},
         [gemini_count(1000, 500), image_count("gemini", None)]),
    ]


def test_each_image_is_an_item_counted_by_its_providers_rule(tmp_path):
    for n, (provider, path, body, counts) in enumerate(image_bodies(), start=1):
        with proxied(tmp_path / provider) as (up, wb, proxy):
            raw = post(proxy, path, body)
            session, plan = only_plan(wb)
            images = [i for i in plan.items if i.kind == "image"]
            assert [i.tokens for i in images] == [c.tokens for c in counts], provider
            assert [i.label for i in images] == [c.label() for c in counts], provider
            assert all(i.section == "files" and i.included for i in images)
            assert sum(i.bytes for i in plan.items) == len(raw), provider
            assert wb.sessions.info(session).title == f"proxy: {QUESTION}"
            turn = next(i for i in plan.items if i.id == "group:1")
            assert plan.used_tokens == sum(i.tokens for i in plan.included)
            assert turn.tokens < 100  # the question and the message's own tokens, no base64 counted as text


def test_an_images_label_says_its_size_and_the_rule_or_that_its_size_is_an_estimate(tmp_path):
    (_p, _path, body, counts) = image_bodies()[0]
    with proxied(tmp_path) as (up, wb, proxy):
        post(proxy, "/v1/messages", body)
        _session, plan = only_plan(wb)
        known, unknown = [i for i in plan.items if i.kind == "image"]
        assert known.label == "image 3000×2000 → 1341×894: 1,599 tok (Anthropic: w×h/750 after scaling to ≤1568 px, " \
                              "≤1,600 tok)"
        assert unknown.label.startswith("image size unknown, counted as 1024×1024 (an estimate): 1,399 tok")
        assert counts[1].estimated and not counts[0].estimated


def test_an_image_a_tool_returns_is_counted_in_its_tool_atom_by_the_providers_rule(tmp_path):
    """Claude Code's Read of a screenshot answers with an image block inside the tool_result; Codex's view_image
    with an input_image in the function_call_output: the atom's tokens hold the image as the provider bills it."""
    shot = anthropic_count(1280, 800)
    claude = {"model": "claude-scripted", "max_tokens": 100, "messages": [
        {"role": "user", "content": "what does the screenshot show?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read",
                                           "input": {"file_path": "/home/u/shot.png"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(png(1280, 800))}}]}]}]}
    view = openai_count(1600, 900, "auto")
    codex = {"model": "gpt-5-codex", "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "look at the chart"}]},
        {"type": "function_call", "name": "view_image", "call_id": "call_1", "arguments": '{"path": "chart.png"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": [
            {"type": "input_image", "image_url": data_url(png(1600, 900))}]}]}
    for provider, path, body, count, call in (("anthropic", "/v1/messages", claude, shot, "toolu_1"),
                                              ("responses", "/v1/responses", codex, view, "call_1")):
        with proxied(tmp_path / provider) as (up, wb, proxy):
            raw = post(proxy, path, body)
            _session, plan = only_plan(wb)
            atom = next(i for i in plan.items if i.id == f"atom:1:{call}")
            assert atom.tokens >= count.tokens and atom.tokens < count.tokens + 60, provider
            assert count.label() in atom.label, provider
            assert sum(i.bytes for i in plan.items) == len(raw), provider


def _provider_with_images(payload: dict) -> int:
    """A provider whose tokenizer makes 1.8 tokens of every cl100k token of the request's texts, 5 a message, and
    counts each image by its published rule (as providers do: an image's tokens are not its text's)."""
    texts, images = [], 0
    for m in payload["messages"]:
        for block in m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]:
            if block["type"] == "image_url":
                images += image_count("openai", block["image_url"]["url"].partition(",")[2],
                                      block["image_url"].get("detail", "")).tokens
            else:
                texts.append(block["text"])
    return round(1.8 * sum(TOK.count(t) for t in texts)) + 5 * len(payload["messages"]) + images


def test_calibration_scales_the_tokenizers_counts_and_leaves_an_images_count_as_its_provider_bills_it(tmp_path):
    from test_proxy import openai_client, settled

    from ctxbench.service.proxy.calibration import calibrated_items, calibration_for

    photo = {"type": "image_url", "image_url": {"url": data_url(png(2048, 4096)), "detail": "high"}}
    messages = [{"role": "system", "content": "You look at pictures carefully. " * 40},
                {"role": "user", "content": [{"type": "text", "text": QUESTION + " " + "in detail " * 50}, photo]}]
    with proxied(tmp_path, [Answer(prompt_of=_provider_with_images)] * 2) as (up, wb, proxy):
        client = openai_client(proxy)
        client.chat.completions.create(model="vision-model", messages=messages)
        messages += [{"role": "assistant", "content": "Hello from upstream."},
                     {"role": "user", "content": [{"type": "text", "text": "and this one? " * 30}, photo]}]
        client.chat.completions.create(model="vision-model", messages=messages)
        first, second = settled(wb)
        calibration = calibration_for(wb, "vision-model", before=second.id)
        assert abs(calibration.ratio - 1.8) < 0.1  # the tokenizer's ratio, not diluted by the images
        plan = wb.plans.get(second.plan_id)
        items = calibrated_items(plan, calibration)
        images = [i for i in plan.included if i.kind == "image"]
        assert len(images) == 2 and all(items[i.id] == i.tokens == openai_count(2048, 4096).tokens for i in images)
        billed = wb.proxy_billing.usage(second.id).prompt
        assert abs(sum(items.values()) - billed) <= 0.02 * billed
