"""A session's settings: the config's defaults under the session's overrides, checked once.

:class:`SettingsRules` knows what each setting may be (the modes are the config's named profiles,
the strategies the planner's, budgets positive, windows 0 or more). A value is checked where it
enters — a stored override, a flag, a key the user pressed — and is then passed around as a frozen
:class:`~ctxbench.records.sessions.SessionSettings`, never read back or checked again.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ctxbench.config import Config, ConfigError
from ctxbench.records.errors import SettingsError
from ctxbench.records.sessions import SETTING_NAMES, SessionSettings
from ctxbench.records.vocab import STRATEGIES


class SettingsRules:
    """What each setting may be, under one config."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def defaults(self) -> SessionSettings:
        p = self.config.planner
        return SessionSettings(p.default_mode, self.config.default_budget_tokens(), p.default_strategy, p.window_groups,
                               p.provider_family)

    def merge(self, overrides: Mapping[str, Any]) -> SessionSettings:
        """The defaults with ``overrides`` (stored by the session) on top; unknown keys are ignored."""
        values = dataclasses.asdict(self.defaults())
        values.update({k: v for k, v in overrides.items() if k in values})
        return SessionSettings(**values)

    def check(self, settings: SessionSettings) -> SessionSettings:
        """``settings`` when every field is usable; SettingsError naming the first that is not."""
        for name in SETTING_NAMES:
            self.check_value(name, getattr(settings, name))
        return settings

    def check_changes(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Each changed value checked (None means: back to the default)."""
        return {k: (None if v is None else self.check_value(k, v)) for k, v in changes.items()}

    def check_value(self, name: str, value: Any) -> Any:
        if name == "mode":
            try:
                self.config.planner.mode(str(value))
            except ConfigError as exc:
                raise SettingsError(str(exc)) from None
            return str(value)
        if name == "budget":
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SettingsError(f"budget must be a positive number of tokens, got {value!r}")
            return value
        if name == "strategy":
            if value not in STRATEGIES:
                raise SettingsError(f"unknown strategy {value!r}; expected one of {', '.join(STRATEGIES)}")
            return value
        if name == "window_groups":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SettingsError(f"window must be a number of groups >= 0 (0 = all), got {value!r}")
            return value
        if name == "provider_family":
            if not isinstance(value, str) or not value:
                raise SettingsError(f"provider family must be a name, got {value!r}")
            return value
        raise SettingsError(f"unknown setting {name!r}; known: {', '.join(SETTING_NAMES)}")
