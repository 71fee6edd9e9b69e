"""Our own checkpoints: a directory written by `save_encoder`, or a `.keras` file.

Directory layout (what the pretraining and fine-tuning recipes write, and `load_encoder` reads):

    config.json                 BertConfig.to_json_file (our field names)
    encoder.weights.h5          BertEncoder.save_weights (Keras 3 weights file)
    keras_bert_checkpoint.json  {"format": "keras_bert", "format_version": 1,
                                 "causal": bool, "do_lower_case": bool or null}
    vocab.txt                   optional, copied from `vocab_file`
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import tempfile

import keras
import tensorflow as tf

# Registers BertEncoder / BertPretrainer for `.keras` files. Task classes (keras_bert.tasks)
# are registered by the package itself; importing them here would make checkpoints depend on
# tasks, which may themselves load checkpoints.
from keras_bert import fileio, models  # noqa: F401
from keras_bert.config import BertConfig
from keras_bert.models.bert_encoder import BertEncoder

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "encoder.weights.h5"
METADATA_FILE = "keras_bert_checkpoint.json"
VOCAB_FILE = "vocab.txt"


@contextlib.contextmanager
def weights_through_disk():
    """Within the block, Keras writes and reads a `.keras` file's weights through a temporary
    file beside the archive, its own path for models larger than the free memory.

    Otherwise Keras stages them in memory whenever the machine has room
    (`saving_lib.is_memory_sufficient`): the weights, their HDF5 image and the bytes handed to the
    zip at once, about 260 MiB above the training peak for MiniLM-L6 when a fine-tuning run
    writes `best_model.keras` (docs/results/memory.md, "Peak resident memory"). Where Keras has no
    such switch (another version), the block changes nothing.
    """
    try:
        from keras.src.saving import saving_lib
    except ImportError:  # pragma: no cover - a Keras without the module: its own behaviour
        yield
        return
    original = getattr(saving_lib, "is_memory_sufficient", None)
    if original is None:
        yield
        return
    saving_lib.is_memory_sufficient = lambda model: False
    try:
        yield
    finally:
        saving_lib.is_memory_sufficient = original


def load_keras_model(path, **kwargs):
    """`keras.saving.load_model(path, **kwargs)` with the weights read through disk
    (`weights_through_disk`)."""
    with weights_through_disk():
        return keras.saving.load_model(path, **kwargs)


# What an HDF5 weights file holds beyond the variables' values: measured at most 2.4 KiB per
# variable and 40 KiB per file (Keras 3 `save_weights`, with and without an optimizer).
_H5_BYTES_PER_VARIABLE, _H5_BYTES_PER_FILE = 4 << 10, 64 << 10
# The errors that say a file system has no room for a write (disk full, quota, RLIMIT_FSIZE).
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def h5_bytes_bound(model) -> int:
    """Bytes, at most, of the HDF5 file Keras writes for `model`'s weights: the values of its
    variables and of its optimizer's (when it has a built one; Keras saves those too), plus
    HDF5's own structures."""
    variables = list(model.weights)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and optimizer.built:
        variables += list(optimizer.variables)
    values = sum(math.prod(v.shape) * tf.as_dtype(v.dtype).size for v in variables)
    return values + _H5_BYTES_PER_VARIABLE * len(variables) + _H5_BYTES_PER_FILE


def check_room(directory: str, nbytes: int, path: str) -> None:
    """Raises a plain OSError when local `directory` has no room for `nbytes` more bytes.

    HDF5 must never meet a full disk: a write that fails inside it leaves the library with a file
    it can neither flush nor close, and the process ends in a segmentation fault (at the next HDF5
    save or at exit) after pages of "Can't decrement id ref count" (h5py issues 914, 2160). So
    the room is asked for first: a hidden file of `nbytes` is allocated in `directory` (the file
    system's own answer, quotas and RLIMIT_FSIZE included), then deleted. A file system that
    cannot allocate ahead (EOPNOTSUPP and the like) is not checked. Another writer filling the
    disk during the save can still meet HDF5 there.

    Raises:
        OSError: ENOSPC, EDQUOT or EFBIG, "<reason>: writing <path> needs about <n> MiB".
    """
    fd, probe = tempfile.mkstemp(prefix=".room-check-", dir=directory)
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as e:
        if e.errno in _NO_ROOM:
            raise OSError(
                e.errno, f"{e.strerror}: writing {path} needs about {nbytes / 2**20:.1f} MiB"
            ) from None
    finally:
        os.close(fd)
        os.remove(probe)


def _save_whole(model, save, path, suffix: str) -> None:
    """Runs `save(local_path)` and publishes the file as `path` (any URI) whole-or-nothing: a
    reader never sees a half-written file under its final name (`fileio.writing_local_file`).
    A disk without room for the HDF5 file fails first, with a plain OSError (`check_room`)."""
    with fileio.writing_local_file(path, suffix) as local:
        check_room(fileio.parent(local), h5_bytes_bound(model), path)
        save(local)


def save_weights_file(model, path) -> None:
    """`model.save_weights(path)` (a `.weights.h5` path or URI), visible only when complete.

    Raises:
        OSError: no room for the file (`check_room`); nothing is written.
    """
    _save_whole(model, model.save_weights, os.fspath(path), ".weights.h5")


@contextlib.contextmanager
def _without_optimizer(model):
    """Within the block `model.optimizer` is None, so `model.save` leaves out its state."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        yield
        return
    model.optimizer = None
    try:
        yield
    finally:
        model.optimizer = optimizer


def load_keras_weights(model, path) -> None:
    """`model.load_weights(path)` of a `.keras` file `save_keras_file` wrote: the model's weights
    only (the file holds no optimizer state, and a compiled model's optimizer keeps its own)."""
    with weights_through_disk(), _without_optimizer(model):
        model.load_weights(path)


def save_keras_file(model, path) -> None:
    """`model.save(path)` (a `.keras` path or URI), visible only when complete, without the
    optimizer's state: nothing reads it back (a task's `compile` is its own, so Keras compiles
    no loaded task, and `load_weights` of a compiled one takes the model's weights alone), and
    Adam's two moments would make the file three times the weights (273 MB for MiniLM-L6)."""
    with weights_through_disk(), _without_optimizer(model):
        _save_whole(model, model.save, os.fspath(path), ".keras")


def save_encoder(encoder, directory, vocab_file=None, do_lower_case=None) -> str:
    """Writes `encoder` as a keras-bert checkpoint directory that `load_encoder` reads.

    Args:
        encoder: a built `BertEncoder`.
        directory: output directory (created if needed; existing files are overwritten).
        vocab_file: optional path of the WordPiece vocab to copy in as `vocab.txt`.
        do_lower_case: optional bool stored for `resolve_do_lower_case`.

    Returns:
        The directory path (str).

    Raises:
        TypeError: if `encoder` is not a `BertEncoder`.
        FileNotFoundError: if `vocab_file` does not exist.
    """
    if not isinstance(encoder, BertEncoder):
        raise TypeError(f"save_encoder needs a BertEncoder, got {type(encoder).__name__}")
    if vocab_file is not None and not fileio.exists(vocab_file):
        raise FileNotFoundError(f"vocab file not found: {vocab_file}")
    directory = os.fspath(directory)
    fileio.makedirs(directory)
    if not encoder.built:
        encoder.build()
    # Each file whole-or-nothing; the weights (what marks the format) last.
    encoder.bert_config.to_json_file(fileio.join(directory, CONFIG_FILE))
    if vocab_file is not None:
        # Read before writing: `vocab_file` may be this very target.
        fileio.write_bytes(fileio.join(directory, VOCAB_FILE), fileio.read_bytes(vocab_file))
    metadata = {
        "format": "keras_bert",
        "format_version": 1,
        "causal": encoder.causal,
        "do_lower_case": None if do_lower_case is None else bool(do_lower_case),
    }
    fileio.write_json(fileio.join(directory, METADATA_FILE), metadata)
    save_weights_file(encoder, fileio.join(directory, WEIGHTS_FILE))
    return directory


def is_keras_bert_dir(directory: str) -> bool:
    return any(fileio.exists(fileio.join(directory, f)) for f in (WEIGHTS_FILE, METADATA_FILE))


def read_metadata(directory: str) -> dict:
    path = fileio.join(directory, METADATA_FILE)
    if not fileio.exists(path):
        return {}
    return fileio.read_json(path)


def load_saved_encoder(directory: str, *, hidden_activation=None, dtype=None, causal=None):
    """Builds a `BertEncoder` from a `save_encoder` directory.

    Raises:
        FileNotFoundError: naming config.json or encoder.weights.h5.
        ValueError: naming the weights file when its variables do not fit the config.
    """
    config = BertConfig.from_json_file(fileio.join(directory, CONFIG_FILE))
    weights = fileio.join(directory, WEIGHTS_FILE)
    if not fileio.exists(weights):
        raise FileNotFoundError(f"keras-bert weights file not found: {weights}")
    if causal is None:
        causal = bool(read_metadata(directory).get("causal", False))
    kwargs = {} if dtype is None else {"dtype": dtype}
    encoder = BertEncoder.from_config_object(
        config, causal=causal, hidden_activation=hidden_activation, **kwargs
    )
    encoder.build()
    try:
        encoder.load_weights(weights)
    except ValueError as e:
        raise ValueError(f"{weights} does not fit the encoder of {CONFIG_FILE}: {e}") from e
    return encoder


def load_keras_file(path: str, *, hidden_activation=None, dtype=None, causal=None):
    """Loads a `.keras` file holding a `BertEncoder`, or a model with one as `.encoder`.

    Overrides, when given, rebuild the encoder with the new settings and copy the weights.

    Raises:
        FileNotFoundError: naming the file.
        TypeError: if the file holds no `BertEncoder`.
    """
    if not fileio.exists(path):
        raise FileNotFoundError(f".keras file not found: {path}")
    model = load_keras_model(path)
    encoder = model if isinstance(model, BertEncoder) else getattr(model, "encoder", None)
    if not isinstance(encoder, BertEncoder):
        raise TypeError(f"{path} holds a {type(model).__name__}, not a BertEncoder")
    if hidden_activation is None and dtype is None and causal is None:
        return encoder
    config = encoder.bert_config
    kwargs = {} if dtype is None else {"dtype": dtype}
    rebuilt = BertEncoder.from_config_object(
        config,
        causal=encoder.causal if causal is None else causal,
        hidden_activation=hidden_activation,
        **kwargs,
    )
    rebuilt.build()
    rebuilt.set_weights(encoder.get_weights())
    return rebuilt
