"""Exports never carry a must-compile (XLA) function, whatever the training flags (SPEC section 8).

Stock TensorFlow Serving refuses to run a function marked `_XlaMustCompile` unless it was started
with `--xla_cpu_compilation_enabled` (tensorflow/serving#2214, #2217). A task trained with
`jit_compile=True` (what the driver's `--jit_compile` passes to `compile`) must still export a
graph without that mark: in every FunctionDef of saved_model.pb, in every call node, and in the
signatures' concrete functions as a fresh `tf.saved_model.load` sees them. The inspector is
checked against a module that does carry the mark, so one that finds nothing cannot pass.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.saved_model import xla_marks
from keras_bert.saved_model.classifier_signatures import ClassifierServingModule
from tests.export.conftest import LABELS3, TEXTS, tiny_classifier


def _double(jit_compile):
    return tf.function(
        lambda x: x * 2.0,
        jit_compile=jit_compile,
        input_signature=[tf.TensorSpec([None], tf.float32)],
    )


def _calls_a_must_compile_function():
    inner = _double(jit_compile=True)
    return tf.function(
        lambda x: inner(x) + 1.0, input_signature=[tf.TensorSpec([None], tf.float32)]
    )


def test_inspector_finds_a_must_compile_function_in_saved_model_pb(tmp_path):
    module = tf.Module()
    module.double = _double(jit_compile=True)
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.double})
    marks = xla_marks.saved_model_marks(str(tmp_path))
    assert any(m.startswith("function ") and "lambda" in m for m in marks), marks
    plain = tmp_path / "plain"
    module.double = _double(jit_compile=False)
    tf.saved_model.save(module, str(plain), signatures={"serving_default": module.double})
    assert xla_marks.saved_model_marks(str(plain)) == []


@pytest.mark.parametrize("make", [lambda: _double(True), _calls_a_must_compile_function])
def test_check_refuses_a_signature_that_is_or_calls_a_must_compile_function(make):
    function = make().get_concrete_function()
    with pytest.raises(ValueError, match=r"signature 'encoded' holds must-compile \(XLA\)"):
        xla_marks.check_no_must_compile({"encoded": function})
    xla_marks.check_no_must_compile({"encoded": _double(False).get_concrete_function()})


def test_export_refuses_must_compile_signatures_and_writes_no_version(
    tmp_path, monkeypatch, uncased_vocab
):
    function = _calls_a_must_compile_function().get_concrete_function()
    monkeypatch.setattr(ClassifierServingModule, "signatures", lambda self: {"encoded": function})
    task = tiny_classifier(2, ["0", "1"], "sst2", seed=0, vocab_file=uncased_vocab)
    with pytest.raises(ValueError, match="must-compile"):
        task.export(tmp_path, "sst2")
    assert list((tmp_path / "sst2").iterdir()) == []


@pytest.mark.slow
def test_task_trained_with_jit_compile_exports_no_must_compile_function(tmp_path, uncased_vocab):
    task = tiny_classifier(3, LABELS3, "own_sentiment", seed=4, vocab_file=uncased_vocab)
    task.compile(
        optimizer="adam",
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    ids = {k: v.numpy() for k, v in task.preprocessor(tf.constant(TEXTS)).items()}
    history = task.fit(ids, np.array([0, 1, 2]), batch_size=3, epochs=1, verbose=0)
    assert task.jit_compile is True and np.isfinite(history.history["loss"][0])

    version_dir = task.export(tmp_path / "models", "jit", version=1)
    assert xla_marks.saved_model_marks(version_dir) == []
    loaded = tf.saved_model.load(version_dir)
    assert set(loaded.signatures) == {"serving_default", "encoded", "classification"}
    for key, fn in loaded.signatures.items():
        assert xla_marks.XLA_MUST_COMPILE_ATTR not in fn.function_def.attr or not (
            fn.function_def.attr[xla_marks.XLA_MUST_COMPILE_ATTR].b
        ), key
        assert xla_marks.must_compile_marks(fn.graph.as_graph_def()) == [], key
    out = loaded.signatures["serving_default"](text=tf.constant(TEXTS))
    want = tf.nn.softmax(task(ids, training=False)).numpy()
    np.testing.assert_allclose(out["probabilities"].numpy(), want, atol=1e-5, rtol=0)
