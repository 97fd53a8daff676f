"""Activation scores (seed 002): per item, updated each turn, and the pins they suggest.

Each turn every score decays (``decay`` is multiplied in), then an item gains ``in_plan`` if it was
in the last plan, ``referenced_by_model`` if the model referenced it (quoted a symbol or a path)
and ``referenced_by_user`` if the user did. Scores that fall below ``forget_below`` are dropped.
Items are named like pin targets: ``group:12``, ``card:pkg.mod.f``.

``suggest_pins`` proposes the highest-scoring items (>= ``suggest_threshold``) that are not pinned
yet; the user accepts them or not — nothing here pins anything.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ctxbench.config import ActivationConfig
from ctxbench.records.plans import Pin


def update_activation(
    scores: Mapping[str, float],
    in_plan: Iterable[str],
    referenced_by_model: Iterable[str],
    referenced_by_user: Iterable[str],
    config: ActivationConfig,
) -> dict[str, float]:
    """The scores after one turn, keys sorted (deterministic)."""
    new = {key: value * config.decay for key, value in scores.items()}
    for items, gain in (
        (in_plan, config.in_plan),
        (referenced_by_model, config.referenced_by_model),
        (referenced_by_user, config.referenced_by_user),
    ):
        for key in set(items):
            new[key] = new.get(key, 0.0) + gain
    return {key: new[key] for key in sorted(new) if new[key] >= config.forget_below}


def _activation_config(config: Any) -> ActivationConfig:
    return config.activation if hasattr(config, "activation") else config


def suggest_pins(scores: Mapping[str, float], pins: Sequence[Pin], config: Any) -> tuple[str, ...]:
    """Items with a high activation that no pin covers, best first (ties by name), at most ``max_suggestions``.

    ``config`` is the ``ActivationConfig`` or a ``PlannerConfig`` holding one.
    """
    cfg = _activation_config(config)
    pinned = {p.target for p in pins}
    ranked = sorted(
        (key for key, value in scores.items() if value >= cfg.suggest_threshold and key not in pinned),
        key=lambda key: (-scores[key], key),
    )
    return tuple(ranked[: cfg.max_suggestions])
