"""`expand_file_patterns`: the one way a flag's comma-separated paths and globs become files.

Used by every recipe and pipeline that takes input files (`create_vocab`, `create_pretraining_data`,
`run_pretraining`, the pretraining tf.data pipeline). A glob such as `data.tfrecord*` must not
pick up the files we write beside a data set (`data.tfrecord.summary.json` from
create_pretraining_data, `*.tmp` files of an unfinished write): those are skipped when a glob
matches them; a path named literally is always kept. Paths and globs may be any URI
`keras_bert.fileio` handles (`gs://bucket/shards/*.tfrecord`).
"""

from __future__ import annotations

from typing import Iterable

from keras_bert import fileio

# Files the project writes beside data sets; never data themselves.
SIDECAR_SUFFIXES = (".summary.json", ".tmp")
GLOB_CHARS = frozenset("*?[")


def split_patterns(patterns: str | Iterable[str]) -> list[str]:
    """A comma-separated string (or an iterable of strings) -> its stripped, non-empty items."""
    items = patterns.split(",") if isinstance(patterns, str) else list(patterns)
    return [p.strip() for p in items if p and p.strip()]


def expand_file_patterns(patterns: str | Iterable[str], what: str = "input file") -> list[str]:
    """Expands paths and globs in the order given, each glob's matches sorted, duplicates dropped.

    Args:
        patterns: comma-separated string or iterable of paths / globs (`*`, `?`, `[...]`).
        what: how error messages name the files ("input file", "pretraining shard", ...).

    Returns:
        list of file paths (str), sidecar files (SIDECAR_SUFFIXES) left out of glob matches.

    Raises:
        FileNotFoundError: "no <what> matches ['a*', 'b.txt']", naming every pattern (or literal
            path) that gives no file.
    """
    items = split_patterns(patterns)
    files, seen, missing = [], set(), []
    for pattern in items:
        if GLOB_CHARS & set(pattern):
            # As a shell: `*` does not match a hidden name (our unfinished writes are hidden).
            hidden = fileio.basename(pattern).startswith(".")
            matched = [
                f
                for f in fileio.glob(pattern)
                if not f.endswith(SIDECAR_SUFFIXES)
                and (hidden or not fileio.basename(f).startswith("."))
                and fileio.isfile(f)
            ]
        else:
            matched = [pattern] if fileio.isfile(pattern) else []
        if not matched:
            missing.append(pattern)
        for f in matched:
            if f not in seen:
                seen.add(f)
                files.append(f)
    if missing or not files:
        raise FileNotFoundError(f"no {what} matches {missing or items!r}")
    return files
