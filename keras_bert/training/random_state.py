"""The random state of a training run, kept with every step checkpoint and put back on resume.

A run resumed at step k must draw what the uninterrupted run drew after step k, or its dropout
masks (and so its weights and dev scores) drift apart (the Hugging Face Trainer keeps
`rng_state.pth` with each checkpoint for the same reason). `capture(model)` records, as JSON:

- "seed_generators": the state of every `keras.random.SeedGenerator` of the model, in
  `model.variables` order: `BertDropout`'s masks (hidden, attention, heads) and any Keras layer
  drawing noise. `model.variables` holds them, `model.weights` (what `save_weights` writes) does
  not: int64 [2] each, [seed, draws so far];
- "keras": Keras's global SeedGenerator (`keras.random.*` called without a seed), null when the
  process never made one;
- "python", "numpy": the global generators of `random` and `numpy.random`;
- "tensorflow": TensorFlow's global `tf.random.Generator` (its algorithm and state), null when
  the process never made one.

`restore(model, state)` puts them all back. Not here because a resume rebuilds them from the
settings and the step: the order of the training batches (seed + epoch, the first batches skipped)
and pretraining's shuffles and dynamic masks (seeded per chunk, stateless per element).

A stateful TensorFlow random op (`tf.random.uniform` without a seed, `tf.random.shuffle`) keeps
its counter inside its kernel, where no checkpoint reaches it; no training step holds one
(tests/training/test_random_state.py reads every family's and pretraining's step graph).
"""

from __future__ import annotations

import base64
import random

import numpy as np
import tensorflow as tf

# Keras's and TensorFlow's process-wide generators are made on first use and have no public
# accessor that does not make one; a checkpoint records them only when they exist.
from keras.src.backend.common import global_state
from keras.src.random.seed_generator import GLOBAL_SEED_GENERATOR, global_seed_generator
from tensorflow.python.ops import stateful_random_ops


def seed_generator_states(model) -> list:
    """The state variables of `model`'s SeedGenerators (int64 [2]), in `model.variables` order:
    what `model.variables` holds beyond `model.weights`."""
    weights = {id(w) for w in model.weights}
    return [v for v in model.variables if id(v) not in weights]


def capture(model) -> dict:
    """The run's random state after the step just trained (module docstring), JSON-able; the
    Mersenne Twister words of Python's and NumPy's generators as base64 of little-endian uint32."""
    keras_generator = global_state.get_global_attribute(GLOBAL_SEED_GENERATOR)
    tf_generator = stateful_random_ops.global_generator
    version, words, gauss = random.getstate()
    name, keys, position, has_gauss, cached = np.random.get_state()
    return {
        "seed_generators": [v.numpy().tolist() for v in seed_generator_states(model)],
        "keras": None if keras_generator is None else keras_generator.state.numpy().tolist(),
        "python": {"version": version, "words": _words_text(words), "gauss": gauss},
        "numpy": {
            "bit_generator": name,
            "key": _words_text(keys),
            "pos": int(position),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "tensorflow": None
        if tf_generator is None
        else {
            "algorithm": int(tf_generator.algorithm),
            "state": tf_generator.state.numpy().tolist(),
        },
    }


def restore(model, state: dict, where: str) -> None:
    """Puts back the random state `capture` recorded (into `model`, built as the run builds it).

    Raises:
        ValueError: the record holds another number of SeedGenerators than `model` has (a
            checkpoint of another model), naming `where`.
    """
    variables = seed_generator_states(model)
    if len(state["seed_generators"]) != len(variables):
        raise ValueError(
            f"{where} holds the state of {len(state['seed_generators'])} random seed generators "
            f"but the model has {len(variables)}: it is a checkpoint of another model"
        )
    for variable, value in zip(variables, state["seed_generators"]):
        variable.assign(np.asarray(value, variable.dtype))
    if state["keras"] is not None:  # made first: a new one draws its seed from Python's random
        generator = global_seed_generator()
        generator.state.assign(np.asarray(state["keras"], generator.state.dtype))
    if state["tensorflow"] is not None:
        _restore_tf_generator(**state["tensorflow"])
    python = state["python"]
    random.setstate((python["version"], tuple(_words(python["words"]).tolist()), python["gauss"]))
    numpy_state = state["numpy"]
    np.random.set_state(
        (
            numpy_state["bit_generator"],
            _words(numpy_state["key"]),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )


def _words_text(words) -> str:
    return base64.b64encode(np.asarray(words, "<u4").tobytes()).decode("ascii")


def _words(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), "<u4").astype(np.uint32)


def _restore_tf_generator(algorithm: int, state: list) -> None:
    existing = stateful_random_ops.global_generator
    if existing is not None and int(existing.algorithm) == algorithm:
        existing.reset(np.asarray(state, np.int64))  # in place: traced functions keep reading it
    else:
        tf.random.set_global_generator(tf.random.Generator.from_state(state, algorithm))
