"""Where the config file and the database live by default (``$CTXBENCH_CONFIG``, ``$CTXBENCH_DB``)."""
from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from ctxbench.config.constants import APP_NAME


def default_config_path() -> Path:
    env = os.environ.get("CTXBENCH_CONFIG")
    if env:
        return Path(env)
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def default_db_path() -> Path:
    env = os.environ.get("CTXBENCH_DB")
    if env:
        return Path(env)
    return Path(platformdirs.user_data_dir(APP_NAME)) / "ctxbench.db"
