"""What a checkpoint format can hold: the one check every writer runs before it writes.

Each format module states its limits as data, a tuple of `Limit(setting, holds, reason)`:
`setting` names one of the encoder's settings (a `BertConfig` field, "causal", or a writer
argument such as "do_lower_case"), `holds(settings)` says whether the format can store the value
the encoder has, and `reason` says what the format holds instead (a `str.format` template over
the settings). `check_format_holds` refuses, naming every setting the format cannot hold with its
value, so a conversion never changes an encoder's outputs (or its training settings) silently.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

REBUILD_HINT = (
    "To convert anyway, rebuild the encoder with values the format holds "
    "(`new = BertEncoder.from_config_object(encoder.bert_config, <setting>=<value>)`, "
    "`new.build()`, `new.set_weights(encoder.get_weights())`), knowing that its outputs change "
    "(docs/checkpoints.md, 'Migration')"
)


class Limit(NamedTuple):
    """One setting a format holds only partly (see the module docstring)."""

    setting: str
    holds: Callable[[dict], bool]
    reason: str


def fixed(setting: str, value, reason: str) -> Limit:
    """The format holds only `value` (it has no field for the setting, or no other choice)."""
    return Limit(setting, lambda s: s[setting] == value, reason)


def one_of(setting: str, values, reason: str) -> Limit:
    """The format holds only the given values (e.g. the activation names it knows)."""
    values = tuple(values)
    return Limit(setting, lambda s: s[setting] in values, reason)


def same_as(setting: str, other: str, reason: str) -> Limit:
    """The format keeps one value for both settings, so they must be equal."""
    return Limit(setting, lambda s: s[setting] == s[other], reason)


def encoder_settings(encoder, **extra) -> dict:
    """Every setting of `encoder` a writer must carry: its BertConfig fields, causal, `extra`."""
    return dict(dataclasses.asdict(encoder.bert_config), causal=encoder.causal, **extra)


def check_format_holds(fmt: str, settings: dict, limits) -> None:
    """Raises unless format `fmt` holds every one of `settings` its `limits` constrain.

    Raises:
        ValueError: "format='keras_hub' cannot hold layer_norm_epsilon=1e-05: keras-hub's
            BertBackbone fixes it at 1e-12; ...", one clause per refused setting, then how to
            convert anyway.
    """
    refused = [
        f"{limit.setting}={settings[limit.setting]!r}: {limit.reason.format(**settings)}"
        for limit in limits
        if not limit.holds(settings)
    ]
    if refused:
        raise ValueError(f"format={fmt!r} cannot hold " + "; ".join(refused) + ". " + REBUILD_HINT)
