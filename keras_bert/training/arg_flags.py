"""absl flags from the fields of an argument set (`argument_set.ArgumentSet` and its subclasses, e.g. a
family's `FinetuneArgs`): `define_flags(cls)` defines one flag per field (name, default, help,
choices, required), so every recipe has every common flag; `from_flags(cls)` reads them back into
`cls`, remembering which the user gave (`ArgumentSet.given`). The fields, their rules and defaults
are the catalogue's, `keras_bert.training.args`. A field's `deprecated_name` (an older spelling)
is defined too and read as the field's flag, with a warning. A program whose other flags are
hand-written takes the catalogue fields it shares (`argument_set.fields_of`, `define_program_flags`).
"""

from __future__ import annotations

import dataclasses
import logging
import typing

from absl import flags

from keras_bert import fileio
from keras_bert.cli import calling_module_name, check_paths_reachable, fail_usage
from keras_bert.training import args

logger = logging.getLogger(__name__)

# The catalogue's fields that name a file the program reads (when given): checked up front by
# every program that takes them (`check_input_files`), before anything is read or loaded.
INPUT_FILE_FIELDS = ("vocab_file",)


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
        _define(kind, f.name, default, meta.get("help", ""), meta.get("choices"), common)
        if meta.get("deprecated_name"):
            help_text = f"Deprecated spelling of --{f.name}."
            _define(kind, meta["deprecated_name"], None, help_text, meta.get("choices"), common)
        if meta.get("required"):
            _mark_required(f.name, meta.get("deprecated_name"), fv)


def _mark_required(name: str, old: str | None, fv) -> None:
    """The flag `name` must be given, by its own spelling or its deprecated one `old`."""
    if old is None:
        flags.mark_flag_as_required(name, flag_values=fv)
        return
    flags.register_multi_flags_validator(
        [name, old],
        lambda values: values[name] is not None or values[old] is not None,
        message=f"--{name} is required",
        flag_values=fv,
    )


def define_program_flags(cls, flag_values=None) -> None:
    """`define_flags(cls)` for a program that writes its other flags by hand (`cls` is
    `argument_set.fields_of` some catalogue fields): listed by the calling program's `--help` and removed
    with its flags, as if it had defined them itself."""
    define_flags(cls, flag_values, module_name=calling_module_name())


def read_program_flags(cls, flag_values=None):
    """`from_flags(cls)` for a program that defined them with `define_program_flags`, every
    URI among the values reachable (`check_paths_reachable`) and every input file there
    (`check_input_files`). A bad value, both spellings of one flag, an unreachable URI or a
    missing input file ends the program as a usage error (`fail_usage`: one line, exit 2).
    """
    try:
        settings = from_flags(cls, flag_values)
        check_paths_reachable(settings)
        check_input_files(settings)
    except (ValueError, FileNotFoundError) as e:
        fail_usage(str(e))
    return settings


def check_input_files(settings) -> None:
    """Every given field of `settings` (an argument set) in `INPUT_FILE_FIELDS` names an
    existing file (`check_input_file`)."""
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if f.name in INPUT_FILE_FIELDS and value:
            check_input_file(f.name, value)


def check_input_file(flag: str, path) -> None:
    """Fails fast on a file the program must read that is not there, before anything runs.

    Args:
        flag: the flag's name, without dashes ("vocab_file").
        path: its value, a local path or a URI (`keras_bert.fileio`).

    Raises:
        FileNotFoundError: "--<flag>=<path>: no such file", or "--<flag>=<path>: a directory,
            not a file"; the program's main ends with it (one line, exit 2).
    """
    if fileio.isdir(path):
        raise FileNotFoundError(f"--{flag}={path}: a directory, not a file")
    if not fileio.exists(path):
        raise FileNotFoundError(f"--{flag}={path}: no such file")


def _define(kind, name: str, default, help_text: str, choices, common: dict) -> None:
    """One absl flag of the kind a field's type gives."""
    if choices is not None and kind is str:
        flags.DEFINE_enum(name, default, list(choices), help_text, **common)
    elif kind is bool:
        flags.DEFINE_boolean(name, default, help_text, **common)
    elif kind is int:
        flags.DEFINE_integer(name, default, help_text, **common)
    elif kind is float:
        flags.DEFINE_float(name, default, help_text, **common)
    elif kind in (tuple, list):
        flags.DEFINE_list(name, default, help_text, **common)
    else:
        flags.DEFINE_string(name, default, help_text, **common)


def from_flags(cls, flag_values=None):
    """`cls` from the parsed flags `define_flags(cls)` defined; `args.given()` is then the flags
    the user passed. Raises ValueError (a bad value, naming the flag; a given flag whose partner
    is missing, naming both: `flag_dependencies`; a field given under both of its spellings)."""
    fv = flags.FLAGS if flag_values is None else flag_values  # an empty FlagValues is falsy
    values, given = {}, set()
    for f in dataclasses.fields(cls):
        flag = _given_as(f, fv)
        value = fv[flag or f.name].value
        if _flag_kind(cls, f) in (tuple, list) and value is not None:
            try:
                value = tuple(int(v) for v in value) if value else None
            except ValueError:
                raise ValueError(
                    f"--{flag or f.name} must be integers separated by commas, got "
                    f"{','.join(value)}"
                ) from None
        values[f.name] = value
        if flag:
            given.add(f.name)
    return cls(**values, given_flags=frozenset(given))


def _given_as(f, fv) -> str | None:
    """The flag the user gave field `f` by: its own, its `deprecated_name` (with a warning naming
    the new spelling), or None when not given.

    Raises:
        ValueError: both spellings given.
    """
    old = f.metadata.get("deprecated_name")
    if not old or not fv[old].present:
        return f.name if fv[f.name].present else None
    if fv[f.name].present:
        raise ValueError(f"--{old} is the deprecated spelling of --{f.name}: give --{f.name} only")
    logger.warning("--%s is deprecated: use --%s", old, f.name)
    return old
