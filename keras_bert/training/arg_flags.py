"""absl flags from the fields of an argument set (`args.ArgumentSet` and its subclasses, e.g. a
family's `FinetuneArgs`): `define_flags(cls)` defines one flag per field (name, default, help,
choices, required), so every recipe has every common flag; `from_flags(cls)` reads them back into
`cls`, remembering which the user gave (`ArgumentSet.given`). The fields, their rules and defaults
are the catalogue's, `keras_bert.training.args`.
"""

from __future__ import annotations

import dataclasses
import typing

from absl import flags

from keras_bert.training import args


def _flag_kind(cls, f) -> type:
    hint = typing.get_type_hints(cls)[f.name]
    kinds = [k for k in typing.get_args(hint) if k is not type(None)] or [hint]
    return typing.get_origin(kinds[0]) or kinds[0]


def define_flags(cls, flag_values=None, module_name: str | None = None) -> None:
    """Define one absl flag per field of `cls` (name, default, help, choices, required).

    Args:
        module_name: the module the flags belong to in `--help` (a recipe passes its own,
            `sys.argv[0]`); default: the catalogue's module, `keras_bert.training.args`.
    """
    fv = flags.FLAGS if flag_values is None else flag_values  # an empty FlagValues is falsy
    for f in dataclasses.fields(cls):
        meta, kind = f.metadata, _flag_kind(cls, f)
        default = None if meta.get("derived") else cls.default(f.name)
        common = dict(flag_values=fv, module_name=module_name or args.__name__)
        help_text = meta.get("help", "")
        if meta.get("choices") is not None and kind is str:
            flags.DEFINE_enum(f.name, default, list(meta["choices"]), help_text, **common)
        elif kind is bool:
            flags.DEFINE_boolean(f.name, default, help_text, **common)
        elif kind is int:
            flags.DEFINE_integer(f.name, default, help_text, **common)
        elif kind is float:
            flags.DEFINE_float(f.name, default, help_text, **common)
        elif kind in (tuple, list):
            flags.DEFINE_list(f.name, default, help_text, **common)
        else:
            flags.DEFINE_string(f.name, default, help_text, **common)
        if meta.get("required"):
            flags.mark_flag_as_required(f.name, flag_values=fv)


def from_flags(cls, flag_values=None):
    """`cls` from the parsed flags `define_flags(cls)` defined; `args.given()` is then the flags
    the user passed. Raises ValueError (a bad value, naming the flag; a given flag whose partner
    is missing, naming both: `flag_dependencies`)."""
    fv = flags.FLAGS if flag_values is None else flag_values  # an empty FlagValues is falsy
    values = {}
    for f in dataclasses.fields(cls):
        value = fv[f.name].value
        if _flag_kind(cls, f) in (tuple, list) and value is not None:
            try:
                value = tuple(int(v) for v in value) if value else None
            except ValueError:
                raise ValueError(
                    f"--{f.name} must be integers separated by commas, got {','.join(value)}"
                ) from None
        values[f.name] = value
    return cls(
        **values,
        given_flags=frozenset(f.name for f in dataclasses.fields(cls) if fv[f.name].present),
    )
