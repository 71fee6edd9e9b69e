"""Subprocess entry point for the distribution tests (run as `python _distributed_harness.py MODE OUT`).

MODE "mirrored": split the host CPU into two logical devices, train the same tiny TextClassifier
on the same global batches with the default strategy and with MirroredStrategy over both CPUs,
and write the per-step losses of each to OUT (JSON).
MODE "worker": one worker of a MultiWorkerMirroredStrategy cluster from $TF_CONFIG; train a few
steps and write the final weights to OUT (.npz).
"""

import json
import sys

import numpy as np
import tensorflow as tf

MODE, OUT = sys.argv[1], sys.argv[2]
if MODE == "mirrored":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

keras.config.disable_traceback_filtering()

from keras_bert.tasks import TextClassifier  # noqa: E402
from keras_bert.training import create_optimizer, get_strategy  # noqa: E402
from keras_bert.training.callbacks import LossHistory  # noqa: E402
from keras_bert.training.fit import build_for_training  # noqa: E402
from tests.tiny import NO_DROPOUT, tiny_encoder  # noqa: E402

B, T, V, STEPS = 8, 12, 37, 4


def data():
    rng = np.random.default_rng(0)
    ids = rng.integers(1, V, size=(B * STEPS, T)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[:, 9:] = 0
    labels = rng.integers(0, 3, size=(B * STEPS,)).astype(np.int32)
    features = {
        "input_word_ids": ids * mask,
        "input_mask": mask,
        "input_type_ids": np.zeros_like(ids),
    }
    ds = tf.data.Dataset.from_tensor_slices((features, labels)).batch(B, drop_remainder=True)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options)


def train(strategy):
    keras.utils.set_random_seed(7)
    with strategy.scope():
        encoder = tiny_encoder(
            vocab_size=V,
            hidden_size=16,
            num_layers=2,
            intermediate_size=24,
            max_sequence_length=T,
            **NO_DROPOUT,
        )
        model = TextClassifier(encoder, 3, dropout_rate=0.0)
        model.compile(
            create_optimizer(1e-2, STEPS, 1),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
    build_for_training(model, strategy, next(iter(data())))
    history = LossHistory()
    model.fit(data(), epochs=1, callbacks=[history], verbose=0, shuffle=False)
    return model, history.losses


if MODE == "mirrored":
    _, single = train(get_strategy("default"))
    strategy = get_strategy("mirrored")
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    _, mirrored = train(strategy)
    with open(OUT, "w") as f:
        json.dump({"single": single, "mirrored": mirrored}, f)
else:
    strategy = get_strategy("multi_worker_mirrored")
    model, losses = train(strategy)
    np.savez(OUT, losses=np.asarray(losses), *[v.numpy() for v in model.weights])
