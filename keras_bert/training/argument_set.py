"""The machinery of an argument set: a field (`arg`: one name, default, rule, help), the
`ArgumentSet` base that checks every field on construction and knows which the user gave,
`fields_of` for a program that shares some catalogue fields, and `Resolution`, the derived values
with their reasons.

The catalogue of fields is `keras_bert.training.args`; the flags made from a set's fields are
`keras_bert.training.arg_flags`.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import ClassVar

from keras_bert.cli import check_not_empty
from keras_bert.training import flag_dependencies


def args_dataclass(cls):
    """`dataclasses.dataclass(kw_only=True)` for an argument set; a common field named in the
    class's `FAMILY_DEFAULTS` gets that default (same help, check and position)."""
    for name, value in cls.__dict__.get("FAMILY_DEFAULTS", {}).items():
        base = next(
            b.__dataclass_fields__[name]
            for b in cls.__mro__[1:]
            if name in getattr(b, "__dataclass_fields__", {})
        )
        setattr(cls, name, dataclasses.field(default=value, metadata=base.metadata))
        cls.__annotations__[name] = base.type
    return dataclasses.dataclass(kw_only=True)(cls)


class Rule(typing.NamedTuple):
    """What a field's value must be: `check(value)` true; `text` says it in the error message."""

    check: typing.Callable
    text: str


POSITIVE = Rule(lambda v: v > 0, "> 0")
AT_LEAST_ONE = Rule(lambda v: v >= 1, ">= 1")
A_FRACTION = Rule(lambda v: 0 < v < 1, "in (0, 1)")  # strictly between 0 and 1
NOT_NEGATIVE = Rule(lambda v: v >= 0, ">= 0")


def arg(
    default=None,
    help: str = "",
    *,
    rule: Rule | None = None,
    choices=None,
    required: bool = False,
    derived: bool = False,
    deprecated_name: str | None = None,
    path: bool = False,
):
    """A field of an argument set.

    Args:
        default: the value when the flag is not given (None for a required field, or one a
            family or the driver fills in).
        help: the flag's help text.
        rule: a `Rule` the non-None values must keep ("--<name> must be <rule.text>, got
            <value>").
        choices: allowed values (an enum flag).
        required: the flag must be given.
        derived: None means "derive it" (`Resolution`); the flag's default stays None.
        deprecated_name: an older spelling of the flag, still accepted on the command line
            (`arg_flags.from_flags` takes its value with a warning naming the field's flag).
        path: the value names a file, a directory or a checkpoint: given empty, it is refused
            ("--<name> is empty", `keras_bert.cli.check_not_empty`), never read as not given.
    """
    meta = {
        "help": help,
        "check": rule and rule.check,
        "rule": rule and rule.text,
        "choices": choices,
        "required": required,
        "derived": derived,
        "deprecated_name": deprecated_name,
        "path": path,
    }
    if required:
        return dataclasses.field(default=None, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@args_dataclass
class ArgumentSet:
    """Base of an argument set (`TrainingArgs`, `keras_bert.training.pretraining.PretrainConfig`):
    every field checked against its `arg` metadata on construction, the defaults, the settings as
    config.json records them, and which fields the user gave.

    `given_flags` (not a field): the names of the flags on the command line (`from_flags`); None
    (a call from Python): the fields whose value is not the default (`given`).
    """

    FAMILY_DEFAULTS: ClassVar[dict] = {}
    # The entry of `flag_dependencies.TABLE` whose flags act only with (or without) another.
    FLAG_TABLE: ClassVar[str | None] = None

    given_flags: dataclasses.InitVar[frozenset | None] = None

    def __post_init__(self, given_flags=None):
        """Check every field against its rule, then across fields (`validate`), then that no
        given flag acts only with another that is missing (`flag_dependencies.TABLE`).

        Raises:
            ValueError: naming the flag, e.g. "--train_batch_size must be >= 1, got 0", or both
                flags, e.g. "--export_quantize acts only with --export_dir (...)".
        """
        if given_flags is not None:
            self.__dict__["_given"] = set(given_flags)
        for f in dataclasses.fields(self):
            value, meta = getattr(self, f.name), f.metadata
            if meta.get("required") or meta.get("path"):  # None (if required), "" or blank
                check_not_empty(f.name, value, required=bool(meta.get("required")))
            if value is None:
                continue
            if meta.get("choices") is not None and value not in meta["choices"]:
                raise ValueError(
                    f"--{f.name} must be one of {', '.join(map(str, meta['choices']))}, "
                    f"got {value!r}"
                )
            if meta.get("check") is not None and not meta["check"](value):
                raise ValueError(f"--{f.name} must be {meta['rule']}, got {value!r}")
        self.validate()
        if self.FLAG_TABLE is not None:
            flag_dependencies.check(
                self.FLAG_TABLE,
                {f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
                self.given(),
            )

    def validate(self) -> None:
        """Checks across fields (subclasses extend it). Raises ValueError naming the flags."""

    @classmethod
    def default(cls, name: str):
        """The default of a field (the family's where it sets one)."""
        return cls.__dataclass_fields__[name].default

    def settings(self) -> dict:
        """Every field, as config.json records it (JSON types)."""
        return {
            f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
            for f in dataclasses.fields(self)
        }

    def given(self) -> list[str]:
        """Names of the fields the user gave: the flags present on the command line
        (`from_flags`), else (a call from Python) those whose value is not the default."""
        explicit = self.__dict__.get("_given")
        if explicit is not None:
            return sorted(explicit)
        return sorted(
            f.name
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != self.default(f.name) and getattr(self, f.name) is not None
        )


def fields_of(
    name: str, catalogue, changes: dict[str, dict], bases: tuple = (ArgumentSet,)
) -> type:
    """An argument set named `name` of some fields of the argument set `catalogue`: the flags of a
    program that writes its other flags by hand (`arg_flags.define_flags` beside its own
    `flags.DEFINE_*`), so a setting it shares with the catalogue has one name, help text, type,
    rule and choices. `changes` maps each field taken to what the program changes of it: `default`
    (its own default, as a family's `FAMILY_DEFAULTS`), `required`, `deprecated_name` (the
    program's older spelling, still accepted with a warning), `derived` (False: a setting the
    catalogue derives when not given is the program's `default` there). The catalogue's checks
    across fields (`validate`) and its `FLAG_TABLE` are not taken. `bases`: the classes the set
    extends, e.g. `(RuntimeArgs,)` for a program whose argument set subclasses it with its own
    fields (`keras_bert.training.pretraining.PretrainConfig`).
    """
    hints = typing.get_type_hints(catalogue)
    spec = []
    for field_name, change in changes.items():
        base = catalogue.__dataclass_fields__[field_name]
        meta = dict(base.metadata)
        meta.update({k: v for k, v in change.items() if k != "default"})
        default = None if meta["required"] else change.get("default", base.default)
        spec.append(
            (field_name, hints[field_name], dataclasses.field(default=default, metadata=meta))
        )
    return dataclasses.make_dataclass(name, spec, bases=bases, kw_only=True)


@dataclasses.dataclass
class Resolution:
    """The values derived for settings the user did not give, each with its reason."""

    derived: dict = dataclasses.field(default_factory=dict)  # name -> {"value", "why"}

    def derive(self, name: str, value, why: str):
        self.derived[name] = {"value": value, "why": why}
        return value
