"""Themes as TOML files: the bundled ones in ``themes/`` and the user's own.

The top-level ``themes/`` folder of the source tree is reachable from the package as
``ctxbench/themes`` (a symlink in the checkout, real files in a wheel), so the same lookup
works from a checkout, an editable install and an installed wheel.
"""
from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import platformdirs
from textual.theme import Theme

from ctxbench.config import APP_NAME

# Colours the workbench's CSS refers to; a theme that does not set them (e.g. a built-in
# Textual theme chosen with /theme) falls back to these.
VARIABLE_DEFAULTS: dict[str, str] = {
    "meter-system": "$text-muted",
    "meter-pins": "$secondary",
    "meter-history": "$primary",
    "meter-retrieval": "$success",
    "meter-scaffold": "$accent",
    "meter-free": "$panel",
    "meter-tools": "$warning",  # proxied requests: tool definitions, tool results, attached files
    "meter-results": "$success",
    "meter-files": "$accent",
    "meter-over": "$error",
    "user-message": "$primary 15%",
    "assistant-message": "$surface",
    "tool-message": "$panel",
    "attachment-text": "$text-muted",
    "mode-off": "$text-muted",
    "mode-light": "$success",
    "mode-heavy": "$accent",
}

_THEME_FIELDS = {f.name for f in dataclasses.fields(Theme)}


class ThemeFileError(ValueError):
    """A theme file cannot be read or holds unknown keys."""


def bundled_themes_dir() -> Path:
    """The folder of the themes shipped with ctxbench."""
    package_dir = Path(__file__).resolve().parent.parent
    for candidate in (package_dir / "themes", package_dir.parent / "themes"):
        if candidate.is_dir():
            return candidate
    return package_dir / "themes"


def user_themes_dir() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME)) / "themes"


def theme_from_file(path: Path) -> Theme:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ThemeFileError(f"cannot read theme {path}: {exc}") from exc
    unknown = set(data) - _THEME_FIELDS
    if unknown:
        raise ThemeFileError(f"{path.name}: unknown keys {', '.join(sorted(unknown))}")
    if "primary" not in data:
        raise ThemeFileError(f"{path.name}: a theme needs at least 'primary'")
    data.setdefault("name", path.stem)
    variables = data.pop("variables", {})
    if not isinstance(variables, dict):
        raise ThemeFileError(f"{path.name}: [variables] must be a table")
    return Theme(**data, variables={str(k): str(v) for k, v in variables.items()})


def load_themes(extra_dirs: tuple[Path, ...] = ()) -> tuple[list[Theme], list[str]]:
    """Every theme found, bundled first (user themes with the same name win), and the errors met."""
    themes: dict[str, Theme] = {}
    errors: list[str] = []
    for folder in (bundled_themes_dir(), user_themes_dir(), *extra_dirs):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = theme_from_file(path)
            except ThemeFileError as exc:
                errors.append(str(exc))
                continue
            themes[theme.name] = theme
    return list(themes.values()), errors
