"""Checks that need an NVIDIA GPU (marked `gpu`; tests/conftest.py skips them, with the reason,
where TensorFlow sees none). `bash scripts/device_check.sh` runs them first and puts one row per
test in its table (tools/device_check.py).

- The encoder in float32 on the GPU gives the CPU's outputs: real MiniLM-L6 weights, padded rows,
  atol 1e-4 with TensorFloat-32 off. TensorFlow multiplies float32 matrices in TF32 (10-bit
  mantissa) on Ampere and later by default, which moves outputs of order 1 by ~1e-3; with TF32 on
  they are compared at atol 2e-2.
- A training step under each 16-bit policy on the GPU, with and without XLA: finite loss, float32
  logits, variables on the GPU, and mixed_float16 under a `LossScaleOptimizer`.
- The fine-tuning driver under MirroredStrategy over every visible GPU and mixed_float16.
"""

import numpy as np
import pytest
import tensorflow as tf

import keras_bert
from keras_bert.models.bert_encoder import BertEncoder
from keras_bert.tasks.text_classifier import TextClassifier
from keras_bert.training import trainer
from keras_bert.training.optimizer import create_optimizer, set_mixed_precision
from tests.training.tiny_family import CONFIG, FAMILY, TinyArgs, synthetic

pytestmark = pytest.mark.gpu


def _features(batch_size: int, seq_length: int) -> dict:
    """int32 [B, T] inputs with [CLS] ... [SEP] and padding after a per-row length >= 3."""
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 30000, (batch_size, seq_length)).astype(np.int32)
    lengths = np.linspace(seq_length, 3, batch_size).astype(np.int32)
    mask = (np.arange(seq_length)[None, :] < lengths[:, None]).astype(np.int32)
    ids[:, 0] = 101
    ids[np.arange(batch_size), lengths - 1] = 102
    return {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


@pytest.mark.parametrize("tf32, atol", [(False, 1e-4), (True, 2e-2)])
def test_encoder_float32_on_the_gpu_matches_the_cpu(tf32, atol):
    was = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(tf32)
    try:
        encoder = keras_bert.from_pretrained("minilm_l6_h384_uncased")
        features = {k: tf.constant(v) for k, v in _features(3, 37).items()}
        with tf.device("/GPU:0"):
            gpu = encoder(features, training=False)
        with tf.device("/CPU:0"):
            cpu = encoder(features, training=False)
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(was)
    assert "GPU" in gpu["sequence_output"].device and "CPU" in cpu["sequence_output"].device
    real = features["input_mask"].numpy().astype(bool)  # padded positions are not compared
    np.testing.assert_allclose(
        gpu["sequence_output"].numpy()[real],
        cpu["sequence_output"].numpy()[real],
        atol=atol,
        rtol=0,
    )
    np.testing.assert_allclose(
        gpu["pooled_output"].numpy(), cpu["pooled_output"].numpy(), atol=atol, rtol=0
    )


@pytest.mark.parametrize(
    "precision, xla",
    [("mixed_float16", False), ("mixed_float16", True), ("mixed_bfloat16", True)],
)
def test_a_16_bit_training_step_on_the_gpu(precision, xla):
    import keras

    set_mixed_precision(precision)
    try:
        task = TextClassifier(BertEncoder.from_config_object(CONFIG), 2, dropout_rate=0.0)
        features, labels = synthetic(16, 0)
        task(features)
        task.compile(
            optimizer=create_optimizer(1e-3, 10, loss_scale=precision == "mixed_float16"),
            loss=task.default_loss(),
            jit_compile=xla,
        )
        losses = [task.train_on_batch(features, labels, return_dict=True)["loss"] for _ in range(3)]
        logits = task(features, training=False)
    finally:
        set_mixed_precision("float32")
    assert np.all(np.isfinite(losses)), losses
    assert logits.dtype == tf.float32 and "GPU" in logits.device
    assert all("GPU" in v.value.device for v in task.trainable_variables)
    if precision == "mixed_float16":
        assert isinstance(task.optimizer, keras.optimizers.LossScaleOptimizer)
        assert int(task.optimizer.iterations.numpy()) == 3  # no step skipped as non-finite


def test_the_driver_under_mirrored_strategy_on_every_gpu_with_mixed_float16(tmp_path):
    args = TinyArgs(
        output_dir=str(tmp_path / "out"),
        verbose=0,
        num_train_epochs=1,
        strategy="mirrored",
        mixed_precision="mixed_float16",
    )
    try:
        summary = trainer.run(FAMILY, args)
    finally:
        set_mixed_precision("float32")
    gpus = len(tf.config.list_physical_devices("GPU"))
    assert summary["runs"][0]["steps"] == 6 and np.isfinite(summary["best"]["loss"])
    config = (tmp_path / "out" / "config.json").read_text()
    assert f'"num_replicas": {gpus}' in config, config
