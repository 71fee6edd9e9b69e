"""Subprocess entry point of test_static_shapes (`python _static_shapes_harness.py TMP`); run it
with XLA_FLAGS=--xla_dump_to=TMP/xla to count the XLA compilations.

Splits the host CPU into two logical devices, then:
1. runs the driver with --jit_compile on the tiny family (48 rows 8 tokens wide, batch 8, one
   epoch) and records the train step's traces and the lengths its batches take (buckets) or would
   take with dynamic padding;
2. trains a tiny TextClassifier on the static-shape batches of 10 rows at batch 4 (`fit_batches`)
   with the default strategy and with MirroredStrategy over both CPUs (no XLA: Keras compiles
   `strategy.run` itself, which XLA cannot place on two devices), recording the per-step losses.
Writes TMP/result.json.
"""

import json
import pathlib
import sys

import tensorflow as tf

TMP = pathlib.Path(sys.argv[1])
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

from keras_bert.data.dynamic_padding import length_buckets  # noqa: E402
from keras_bert.models.bert_encoder import BertEncoder  # noqa: E402
from keras_bert.tasks.text_classifier import TextClassifier  # noqa: E402
from keras_bert.training import trainer  # noqa: E402
from keras_bert.training.batches import fit_batches, train_batches  # noqa: E402
from keras_bert.training.callbacks import LossHistory  # noqa: E402
from keras_bert.training.fit import build_for_training  # noqa: E402
from keras_bert.training.strategy import get_strategy  # noqa: E402
from tests.training.tiny_family import CONFIG, TinyArgs, Tiny, synthetic  # noqa: E402

TRACES = []


class CountingTiny(Tiny):
    """The tiny family whose task counts the traces of its train step."""

    def build_task(self, args, data, preprocessor):
        task = super().build_task(args, data, preprocessor)
        step = task.train_step

        def train_step(batch):
            TRACES.append(tuple(tuple(t.shape) for t in tf.nest.flatten(batch)))
            return step(batch)

        task.train_step = train_step
        return task


def widths(static_shapes):
    features, labels = synthetic(48, 0)
    batches = train_batches(
        features, labels, 8, 42, 0, 0, pad_to_multiple_of=1, static_shapes=static_shapes
    )
    return sorted({int(b[0]["input_mask"].shape[1]) for b in batches})


def driver_run():
    args = TinyArgs(
        output_dir=str(TMP / "out"),
        verbose=0,
        jit_compile=True,
        num_train_epochs=1,
        pad_to_multiple_of=1,
    )
    summary = trainer.run(CountingTiny(), args)
    return {
        "steps": summary["runs"][0]["steps"],
        "tracing_count": len(TRACES),
        "traced_shapes": TRACES,
        "buckets": list(length_buckets(8)),
        "buckets_hit": widths(True),
        "dynamic_widths": len(widths(False)),
    }


def train(strategy):
    keras.utils.set_random_seed(7)
    features, labels = synthetic(10, 3)
    with strategy.scope():
        model = TextClassifier(BertEncoder.from_config_object(CONFIG), 2, dropout_rate=0.0)
        model.compile(keras.optimizers.SGD(0.5), model.default_loss())
    build_for_training(model, strategy, (features, labels))
    history = LossHistory()
    batches = fit_batches(
        strategy,
        True,
        features=features,
        labels=labels,
        batch_size=4,
        seed=0,
        epoch=0,
        skip=0,
        pad_to_multiple_of=1,
    )
    model.fit(batches, epochs=1, steps_per_epoch=3, callbacks=[history], verbose=0, shuffle=False)
    return history.losses


result = driver_run()
mirrored = get_strategy("mirrored")
result |= {
    "replicas": mirrored.num_replicas_in_sync,
    "single": train(get_strategy("default")),
    "mirrored": train(mirrored),
}
(TMP / "result.json").write_text(json.dumps(result))
