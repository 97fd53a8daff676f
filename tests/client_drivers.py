"""The real assistants (Claude Code, Codex CLI, aider, Gemini CLI) as the tests run them: where `make clients`
installed them, the environment each gets (a home of its own, its base URL, a dummy key, no telemetry, no
update check) and its command line for one question, or for a question that continues its last conversation.

A client that is not installed skips its test with a reason naming what is missing."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CLIENTS_DIR = Path(os.environ.get("CTXBENCH_CLIENTS_DIR") or REPO / ".clients")
NPM_BIN = CLIENTS_DIR / "npm" / "node_modules" / ".bin"
AIDER_BIN = CLIENTS_DIR / "aider-venv" / "bin"
CLIENT_TIMEOUT_S = 120  # one client run, start to exit (a hung client fails its test instead of hanging the suite)
DUMMY_KEY = "sk-dummy-client-key-5e4d3c2b1a"
MODELS = {"claude": "claude-scripted", "codex": "gpt-scripted", "aider": "gpt-scripted", "gemini": "gemini-2.5-flash"}
PACKAGES = {"claude": "@anthropic-ai/claude-code (npm)", "codex": "@openai/codex (npm)",
            "gemini": "@google/gemini-cli (npm)", "aider": "aider-chat (PyPI)"}
QUIET_ENV = {
    "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1", "OTEL_SDK_DISABLED": "true", "NO_COLOR": "1", "TERM": "dumb",
    "GEMINI_CLI_TRUST_WORKSPACE": "true", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}


def executable(name: str) -> Path:
    """The installed client ``name``, or skip saying what is missing."""
    folder = AIDER_BIN if name == "aider" else NPM_BIN
    if name != "aider" and shutil.which("node") is None:
        pytest.skip(f"node is not installed, so {name} ({PACKAGES[name]}) cannot run")
    path = folder / name
    if not path.exists():
        pytest.skip(f"{name} is not installed: `make clients` installs {PACKAGES[name]} into {folder}")
    return path


@dataclass
class Driver:
    """One client, set up in ``home`` (its config and session files) to run in ``cwd``."""

    name: str
    home: Path
    cwd: Path

    def environment(self, base_url: str) -> dict[str, str]:
        """The client's environment: nothing of the user's but PATH and the locale, its base URL at ``base_url``
        (the proxy's root, or for ``wrap`` nothing: pass ``""``)."""
        env = {"PATH": f"{NPM_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(self.home),
               "LANG": "C.UTF-8", **QUIET_ENV}
        if self.name == "claude":
            env["ANTHROPIC_API_KEY"] = DUMMY_KEY
            if base_url:
                env["ANTHROPIC_BASE_URL"] = base_url
        elif self.name in ("codex", "aider"):
            env["OPENAI_API_KEY"] = DUMMY_KEY
            env["CODEX_HOME"] = str(self.home / ".codex")
        elif self.name == "gemini":
            env["GEMINI_API_KEY"] = DUMMY_KEY
            if base_url:
                env["GOOGLE_GEMINI_BASE_URL"] = base_url
        return env

    def prepare(self, base_url: str) -> None:
        """The client's own config files, as a user of it would have them."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.cwd.mkdir(parents=True, exist_ok=True)
        if self.name == "codex":
            (self.home / ".codex").mkdir(exist_ok=True)
            lines = [f'model = "{MODELS["codex"]}"', "check_for_update_on_startup = false",
                     "[analytics]", "enabled = false"]
            if base_url:
                lines[1:1] = ['model_provider = "scripted"']
                lines += ["[model_providers.scripted]", 'name = "scripted upstream through ctxbench"',
                          f'base_url = "{base_url}/v1"', 'env_key = "OPENAI_API_KEY"', 'wire_api = "responses"']
            (self.home / ".codex" / "config.toml").write_text("\n".join(lines) + "\n")
        if self.name == "gemini":
            (self.home / ".gemini").mkdir(exist_ok=True)
            settings = {"security": {"auth": {"selectedType": "gemini-api-key"}},
                        "privacy": {"usageStatisticsEnabled": False}, "general": {"disableAutoUpdate": True}}
            (self.home / ".gemini" / "settings.json").write_text(json.dumps(settings))

    def argv(self, question: str, *, resume: bool = False, base_url: str = "") -> list[str]:
        """The command line asking ``question`` (``resume``: as the next turn of the last conversation)."""
        exe = str(executable(self.name))
        if self.name == "claude":
            return [exe, "-p", *(["--continue"] if resume else []), question]
        if self.name == "codex":
            head = [exe, "exec", "resume", "--last"] if resume else [exe, "exec"]
            return [*head, "--skip-git-repo-check", question]
        if self.name == "aider":
            return [exe, *(["--openai-api-base", f"{base_url}/v1"] if base_url else []),
                    "--model", f"openai/{MODELS['aider']}", "--message", question, "--yes-always", "--no-git",
                    "--no-check-update", "--no-show-release-notes", "--no-show-model-warnings", "--no-analytics", "--no-pretty",
                    "--no-fancy-input", "--map-tokens", "0", *(["--restore-chat-history"] if resume else [])]
        return [exe, "-m", MODELS["gemini"], *(["--resume", "latest"] if resume else []), "-p", question]

    def ask(self, base_url: str, question: str, *, resume: bool = False) -> subprocess.CompletedProcess[str]:
        self.prepare(base_url)
        return run(self.argv(question, resume=resume, base_url=base_url), self.environment(base_url), self.cwd)


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=CLIENT_TIMEOUT_S)


def shown(result: subprocess.CompletedProcess[str], calls: list[str]) -> str:
    """What a failing assertion shows: the exit code, both outputs' tails and what the upstream was asked."""
    return (f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
            f"\n--- upstream calls\n" + "\n".join(calls))
