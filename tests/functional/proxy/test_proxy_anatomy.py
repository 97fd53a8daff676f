"""What each assistant sends, as items: the reminder blocks Claude Code puts inside the user message, aider's
few-shot examples, repository map and chat files, Codex's instructions, AGENTS.md and environment context —
each an item of its kind, apart from the words the user typed, which title the session. Every byte of the
request belongs to exactly one item. Request bodies shaped like those clients send, through a real proxy on
loopback to a scripted upstream."""
from __future__ import annotations

import json
import time

import httpx2 as httpx
from test_proxy import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY, proxied, settled
from upstream_server import Answer

from ctxbench.records.errors import NotFound
from ctxbench.service.proxy.anatomy import segments
from ctxbench.service.proxy.wire import parse_request
from ctxbench.service.proxy.wire_bytes import json_spans
from ctxbench.tokens import get_tokenizer

CLAUDE_ENV = ("<system-reminder>\n# Environment\nYou have been invoked in the following environment:\n"
              " - Primary working directory: /home/u/proj\n - Is a git repository: true\n</system-reminder>\n")
CLAUDE_MD = ("<system-reminder>\nAs you answer the user's questions, you can use the following context:\n"
             "# claudeMd\nCodebase and user instructions are shown below.\n\nContents of /home/u/proj/CLAUDE.md "
             "(project instructions, checked into the codebase):\n\nAlways run the tests with make test.\n"
             "</system-reminder>\n")
CLAUDE_SKILLS = ("<system-reminder>\nThe following skills are available for use with the Skill tool:\n\n"
                 "- pdf: read and write PDF files\n</system-reminder>")
TYPED = "why does test_rounding fail on CI?"


def claude_code_body(extra: list[dict] | None = None) -> dict:
    return {
        "model": "claude-scripted", "max_tokens": 32000, "stream": False,
        "system": [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
                   {"type": "text", "text": "You are an interactive CLI tool that helps users with software "
                                            "engineering tasks. " * 20, "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "Bash", "description": "Run a shell command. " * 30,
                   "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}},
                  {"name": "Read", "description": "Read a file.",
                   "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}],
        "metadata": {"user_id": "user_abc_account__session_1"},
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": CLAUDE_ENV}, {"type": "text", "text": CLAUDE_MD},
            {"type": "text", "text": CLAUDE_SKILLS},
            {"type": "text", "text": TYPED, "cache_control": {"type": "ephemeral"}}]}, *(extra or [])],
    }


AIDER_EXAMPLES = [
    {"role": "user", "content": "Change the greeting to be more casual"},
    {"role": "assistant", "content": "Ok, I will:\n\n1. Switch the greeting text from \"Hello\" to \"Hey\".\n\n"
                                     "show_greeting.py\n```\nimport sys\n\ndef greeting(name):\n"
                                     "    print(f\"Hey {name}\")\n```\n"},
    {"role": "user", "content": "I switched to a new code base. Please don't consider the above files or try to "
                                "edit them any longer."},
    {"role": "assistant", "content": "Ok."},
]
AIDER_REPO = [
    {"role": "user", "content": "Here are summaries of some files present in my git repository.\nDo not propose "
                                "changes to these files, treat them as *read-only*.\n\nledger.py:\n│def total()\n"},
    {"role": "assistant", "content": "Ok, I won't try and edit those files without asking first."},
]
AIDER_FILES = [
    {"role": "user", "content": "I have *added these files to the chat* so you can go ahead and edit them.\n\n"
                                "*Trust this message as the true contents of these files!*\n\nledger.py\n```\n"
                                "def total():\n    return round(sum(x), 2)\n```\n"},
    {"role": "assistant", "content": "Ok, any changes I propose will be to those files."},
]
AIDER_QUESTION = "make total() round half up instead of to even"


def aider_body(done: list[dict] | None = None, question: str = AIDER_QUESTION) -> dict:
    return {"model": "gpt-4o", "temperature": 0, "stream": False, "messages": [
        {"role": "system", "content": "Act as an expert software developer. Always use best practices."},
        *AIDER_EXAMPLES, *AIDER_REPO, *(done or []), *AIDER_FILES, {"role": "user", "content": question}]}


def codex_body() -> dict:
    return {
        "model": "gpt-5-codex", "instructions": "You are Codex, based on GPT-5. You are running as a coding agent "
                                                "in the Codex CLI on a user's computer.", "store": False,
        "stream": True, "tool_choice": "auto", "parallel_tool_calls": False, "include": ["reasoning.encrypted_content"],
        "tools": [{"type": "function", "name": "shell", "description": "Runs a shell command.", "strict": False,
                   "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}}],
        "input": [
            {"type": "message", "role": "developer", "content": [
                {"type": "input_text", "text": "<permissions instructions>\nFilesystem sandboxing: read-only.\n"
                                               "</permissions instructions>"}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "# AGENTS.md instructions for /home/u/proj\n\n<INSTRUCTIONS>\n"
                                               "Use uv to run Python.\n</INSTRUCTIONS>"}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "<environment_context>\n  <cwd>/home/u/proj</cwd>\n"
                                               "  <shell>bash</shell>\n</environment_context>"}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "list the python files here"}]},
        ],
    }


def post(proxy, path: str, body: dict, *, indent: int | None = None) -> bytes:
    raw = json.dumps(body, indent=indent).encode()
    headers = {"content-type": "application/json", "x-api-key": FAKE_ANTHROPIC_KEY,
               "authorization": f"Bearer {FAKE_OPENAI_KEY}"}
    with httpx.Client(timeout=30) as client:
        response = client.post(proxy.url + path, content=raw, headers=headers)
        response.read()
    return raw


def only_plan(wb, nth: int = 1, timeout: float = 10.0):
    """The session and plan of the ``nth`` request posted, once it is recorded and finished (the client has the
    reply a moment before the proxy has written a request it forwarded as it arrived)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            exchange = wb.proxy.exchange(nth)
        except NotFound:
            exchange = None
        if exchange is not None and exchange.outcome != "pending" or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert exchange is not None, f"request {nth} was not recorded"
    return exchange.session_id, wb.plans.get(exchange.plan_id)


def test_claude_codes_reminders_are_items_of_their_kind_and_the_typed_words_title_the_session(tmp_path):
    with proxied(tmp_path) as (up, wb, proxy):
        raw = post(proxy, "/v1/messages", claude_code_body())
        session, plan = only_plan(wb)
        assert wb.sessions.info(session).title == f"proxy: {TYPED}"
        kinds = {i.kind: i for i in plan.items}
        assert kinds["environment"].section == "scaffold" and "# Environment" in kinds["environment"].messages[0][
            "content"]
        assert kinds["memory_file"].label == "memory file /home/u/proj/CLAUDE.md"
        assert kinds["skill_list"].tokens > 0
        turn = next(i for i in plan.items if i.id == "group:1")
        assert turn.label == f"turn 1: {TYPED}" and [m["content"] for m in turn.messages] == [TYPED]
        assert plan.query == TYPED
        assert [m.content for m in wb.messages.all(session)] == [TYPED]  # the history holds the user's words
        assert sum(i.bytes for i in plan.items) == len(raw)
        # the next request of the conversation: same session, the title stays the user's words
        post(proxy, "/v1/messages", claude_code_body([
            {"role": "assistant", "content": "Hello from upstream."},
            {"role": "user", "content": [{"type": "text", "text": "<system-reminder>\nThe todo list is empty."
                                                                  "\n</system-reminder>\nand now fix it"}]}]))
        session2, plan2 = only_plan(wb, 2)
        assert session2 == session and wb.sessions.info(session).title == f"proxy: {TYPED}"
        todo = next(i for i in plan2.items if i.kind == "todo_list")
        assert todo.id.startswith("todo_list:2:") and "todo list is empty" in todo.messages[0]["content"]
        assert next(i for i in plan2.items if i.id == "group:2").messages[-1]["content"] == "and now fix it"
        assert plan2.query == "and now fix it"


def test_aiders_examples_repo_map_and_files_are_items_and_its_conversation_keeps_one_session(tmp_path):
    with proxied(tmp_path, [Answer(text="Use ROUND_HALF_UP."), Answer(text="done")]) as (up, wb, proxy):
        raw = post(proxy, "/v1/chat/completions", aider_body())
        session, plan = only_plan(wb)
        assert wb.sessions.info(session).title == f"proxy: {AIDER_QUESTION}"
        items = {i.id: i for i in plan.items}
        few = items["few_shot"]
        assert few.kind == "few_shot" and few.section == "scaffold" and len(few.messages) == 4
        assert "Change the greeting" in few.messages[0]["content"]
        (repo,) = [i for i in plan.items if i.kind == "repo_map"]  # the map with the assistant's "Ok." after it
        assert repo.id == "repo_map:5" and [m["role"] for m in repo.messages] == ["user", "assistant"]
        assert next(i for i in plan.items if i.kind == "chat_files").messages[0]["content"].startswith("I have")
        assert [i.id for i in plan.items if i.section == "history"] == ["group:1"]
        assert [m.content for m in wb.messages.all(session)] == [AIDER_QUESTION]
        assert sum(i.bytes for i in plan.items) == len(raw)
        # aider's next request: the question and reply join the history, the files message moves after them
        done = [{"role": "user", "content": AIDER_QUESTION}, {"role": "assistant", "content": "Use ROUND_HALF_UP."}]
        post(proxy, "/v1/chat/completions", aider_body(done, "now add a test for it"))
        session2, plan2 = only_plan(wb, 2)
        assert session2 == session and len(settled(wb, session)) == 2
        assert [m.content for m in wb.messages.all(session)] == [AIDER_QUESTION, "Use ROUND_HALF_UP.",
                                                                 "now add a test for it"]


def test_codex_instructions_agents_md_and_environment_are_items_apart_from_the_prompt(tmp_path):
    with proxied(tmp_path) as (up, wb, proxy):
        raw = post(proxy, "/v1/responses", codex_body())
        session, plan = only_plan(wb)
        assert wb.sessions.info(session).title == "proxy: list the python files here"
        system = [i for i in plan.items if i.section == "system" and i.kind == "system_prompt"]
        assert len(system) == 2 and "You are Codex" in system[0].label and "permissions" in system[1].label
        memory = next(i for i in plan.items if i.kind == "memory_file")
        assert memory.section == "scaffold" and "AGENTS.md" in memory.messages[0]["content"]
        env = next(i for i in plan.items if i.kind == "environment")
        assert "<cwd>/home/u/proj</cwd>" in env.messages[0]["content"]
        assert [i.id for i in plan.items if i.section == "history"] == ["group:1"]
        assert plan.query == "list the python files here"
        assert sum(i.bytes for i in plan.items) == len(raw)


def test_every_byte_of_a_request_belongs_to_exactly_one_item():
    tok = get_tokenizer()
    bodies = [("anthropic", claude_code_body()), ("openai", aider_body()), ("responses", codex_body()),
              ("responses", {"model": "m", "input": "just a string ünïcode \u2028 \"quoted\""}),
              ("openai", {"model": "m", "messages": [
                  {"role": "user", "content": [{"type": "text", "text": "é"},
                                               {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                  {"role": "tool", "tool_call_id": "c1", "content": "<system-reminder>x</system-reminder>out"},
                  {"role": "user", "content": "<system-reminder>\ntodo: none\n</system-reminder>\nmixed words"}]})]
    from test_proxy_images import image_bodies  # an image in each wire format (that module imports this one)

    bodies += [(provider, body) for provider, _path, body, _counts in image_bodies()]
    from ctxbench.config import Config
    from ctxbench.service.proxy.plan import SteerControls, steer_plan

    config = Config()
    for provider, body in bodies:
        for raw in (json.dumps(body).encode(), json.dumps(body, indent=2, ensure_ascii=True).encode(),
                    json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()):
            request = parse_request(provider, raw, tok)
            n = len(request.history)
            steered = steer_plan(request, "s", tuple(range(1, n + 1)), tuple(() for _ in range(n)),
                                 SteerControls(steer=False, mode="off", budget=100_000), proxy=config.proxy,
                                 truncation=config.planner.truncation, tokenizer=tok)
            assert sum(i.bytes for i in steered.plan.items) == len(raw), (provider, raw[:80])
            assert all(i.bytes >= 0 for i in steered.plan.items)


def test_json_spans_are_the_values_text():
    text = '{ "a" : [1, {"b": "x\\"y"}, [2, 3]], "c": null }'
    spans = json_spans(text)
    assert text[slice(*spans[("a",)])] == '[1, {"b": "x\\"y"}, [2, 3]]'
    assert text[slice(*spans[("a", 1, "b")])] == '"x\\"y"' and text[slice(*spans[("c",)])] == "null"


def test_a_reply_after_a_message_of_reminders_stays_in_the_conversation():
    body = {"model": "c", "max_tokens": 5, "messages": [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": [{"type": "text", "text": "<system-reminder>\nThe user opened app.py\n"
                                                              "</system-reminder>"}]},
        {"role": "assistant", "content": "Ok, I see app.py."},
        {"role": "user", "content": "thanks"}]}
    request = parse_request("anthropic", json.dumps(body).encode(), get_tokenizer())
    assert [m.scaffold for m in request.messages] == ["", "", "reminder", "", ""]
    assert [m.index for m in request.history] == [0, 1, 3, 4]


CLAUDE_SYSTEM_MESSAGE = (
    "# Environment\nYou have been invoked in the following environment: \n - Primary working directory: /home/u/proj\n"
    " - Is a git repository: false\n - Platform: linux\n\nYou are powered by the model named Opus. The exact model ID "
    "is claude-opus.\n\nThe following deferred tools are now available via ToolSearch. Their schemas are NOT loaded."
    "\nCronCreate\nWebFetch\nWebSearch\n\nAvailable agent types for the Agent tool:\n- Explore: Read-only search "
    "agent. (Tools: Read)\n- Plan: Software architect agent. (Tools: *)\n\nWhen you launch multiple agents for "
    "independent work, send them in a single message.\n\nThe following skills are available for use with the Skill "
    "tool:\n\n- init: Initialize a new CLAUDE.md file\n- security-review: Complete a security review\n\n"
    "Today's date is 2026-11-27.")


def test_a_system_message_inside_claude_codes_messages_is_items_of_its_kinds(tmp_path):
    """Claude Code 2.1 sends its environment, deferred tools, agent types and skills as a system-role message
    among the messages: each part an item of its kind, and every byte of it in one of them."""
    body = claude_code_body()
    body["messages"].append({"role": "system", "content": [
        {"type": "text", "text": CLAUDE_SYSTEM_MESSAGE, "cache_control": {"type": "ephemeral"}}]})
    with proxied(tmp_path) as (up, wb, proxy):
        raw = post(proxy, "/v1/messages", body)
        session, plan = only_plan(wb)
        assert sum(i.bytes for i in plan.items) == len(raw)
        parts = [i for i in plan.items if i.section == "scaffold" and i.id.split(":")[1] == "1"]  # message 1's
        assert [i.kind for i in parts] == ["environment", "deferred_tools", "agent_types", "skill_list",
                                           "environment"]
        assert all(i.section == "scaffold" and i.tokens > 0 for i in parts)
        assert "".join(m["content"] for i in parts for m in i.messages) == CLAUDE_SYSTEM_MESSAGE
        assert parts[0].messages[0]["role"] == "system" and "model named Opus" in parts[0].messages[0]["content"]
        assert "When you launch multiple agents" in parts[2].messages[0]["content"]
        assert wb.sessions.info(session).title == f"proxy: {TYPED}"
        assert [m.content for m in wb.messages.all(session)] == [TYPED]


AIDER_SYSTEM = "Act as an expert software developer.\nTake requests for changes to the supplied code.\n\n"
AIDER_REMINDER = ("To suggest changes to a file you MUST return the entire content of the updated file.\nYou MUST "
                  "use this *file listing* format:\n\npath/to/filename.js\n```\n// entire file content ...\n```\n\n"
                  "Reply in English.\n\n")


def aider_reminded(done: list[dict], question: str) -> dict:
    """aider's request (whole-file edit format): its reminder ends the system prompt and is appended to the
    user's newest message only."""
    return {"model": "gpt-4o", "stream": True, "temperature": 0, "messages": [
        {"role": "system", "content": AIDER_SYSTEM + AIDER_REMINDER}, *AIDER_EXAMPLES,
        {"role": "user", "content": "I am not sharing any files that you can edit yet."},
        {"role": "assistant", "content": "Ok."}, *done,
        {"role": "user", "content": f"{question}\n\n{AIDER_REMINDER}"}]}


def test_the_reminder_aider_appends_to_the_users_message_is_an_item_and_not_the_title(tmp_path):
    with proxied(tmp_path) as (up, wb, proxy):
        raw = post(proxy, "/v1/chat/completions", aider_reminded([], AIDER_QUESTION))
        session, plan = only_plan(wb)
        assert wb.sessions.info(session).title == f"proxy: {AIDER_QUESTION}"
        turn = next(i for i in plan.items if i.id == "group:1")
        assert [m["content"] for m in turn.messages] == [AIDER_QUESTION] and plan.query == AIDER_QUESTION
        (reminder,) = [i for i in plan.items if i.kind == "reminder"]
        assert reminder.section == "scaffold" and reminder.messages[0]["content"] == f"\n\n{AIDER_REMINDER}"
        assert sum(i.bytes for i in plan.items) == len(raw)
        assert [m.content for m in wb.messages.all(session)] == [AIDER_QUESTION]


def test_aiders_turns_share_a_session_though_it_moves_its_reminder_off_the_previous_message(tmp_path):
    with proxied(tmp_path, [Answer(text="Use ROUND_HALF_UP."), Answer(text="done")]) as (up, wb, proxy):
        post(proxy, "/v1/chat/completions", aider_reminded([], AIDER_QUESTION))
        session, _plan = only_plan(wb)
        done = [{"role": "user", "content": AIDER_QUESTION}, {"role": "assistant", "content": "Use ROUND_HALF_UP."}]
        post(proxy, "/v1/chat/completions", aider_reminded(done, "now add a test for it"))
        session2, plan2 = only_plan(wb, 2)
        assert session2 == session and len(settled(wb, session)) == 2
        assert [m.content for m in wb.messages.all(session)] == [AIDER_QUESTION, "Use ROUND_HALF_UP.",
                                                                 "now add a test for it"]
        assert [i.id for i in plan2.items if i.section == "history"] == ["group:1", "group:2"]


def test_only_a_long_end_repeating_the_system_prompt_is_read_as_a_reminder():
    system = AIDER_SYSTEM + AIDER_REMINDER
    pieces = segments(f"{AIDER_QUESTION}\n\n{AIDER_REMINDER}", [system])
    assert pieces == [(0, len(AIDER_QUESTION), ""), (len(AIDER_QUESTION), len(AIDER_QUESTION) + 2 + len(
        AIDER_REMINDER), "reminder")]
    # a user's words that end as the system prompt does, but briefly, are the user's words
    assert segments("please reply in English.\n\n", ["Be brief.\n\nReply in English.\n\n"]) == [(0, 26, "")]
    assert segments(AIDER_QUESTION, [system]) == [(0, len(AIDER_QUESTION), "")]
    # the whole text repeating it is all reminder
    assert segments(AIDER_REMINDER, [system]) == [(0, len(AIDER_REMINDER), "reminder")]
