"""benchmarks/peers/squad_task_to_hf.py: a SQuAD task written as a BertForQuestionAnswering directory
holds the task's encoder, its span head in transformers' layout, vocabulary and casing."""

import json

import numpy as np
import pytest
import safetensors.numpy

from benchmarks.peers.squad_task_to_hf import QA_BIAS, QA_WEIGHT, write_squad_task_hf
from keras_bert.checkpoints.saver import save_encoder
from tests.tasks.test_span_question_answerer import VOCAB, tiny_task
from tests.evaluation.tiny_task import randomized


def test_written_directory_gives_the_tasks_span_logits(tmp_path):
    task = tiny_task()
    task.build()
    task = randomized(task, seed=3, stddev=0.3)
    head = task.span_logits.kernel  # a large head: the positions' and the columns' logits differ
    head.assign(np.random.default_rng(4).normal(0.0, 3.0, head.shape).astype("float32"))
    write_squad_task_hf(task, str(tmp_path / "hf"))
    tensors = safetensors.numpy.load((tmp_path / "hf" / "model.safetensors").read_bytes())
    kernel, bias = task.span_logits.kernel.numpy(), task.span_logits.bias.numpy()
    np.testing.assert_array_equal(tensors[QA_WEIGHT], kernel.T)  # [2, hidden]: start, end
    np.testing.assert_array_equal(tensors[QA_BIAS], bias)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForQuestionAnswering"]
    assert (tmp_path / "hf" / "vocab.txt").read_text().splitlines() == VOCAB
    assert json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())["do_lower_case"]

    # The encoder's tensors are save_encoder's (tests/checkpoints); with the task's encoder, the
    # written head gives the task's logits: columns in transformers' order, start then end.
    ids = np.array([[2, 5, 6, 3, 7, 8, 9, 3]], np.int32)
    inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids), "input_type_ids": 0 * ids}
    inputs["input_type_ids"][:, 4:] = 1
    sequence = np.asarray(task.encoder(inputs, training=False)["sequence_output"])
    save_encoder(task.encoder, str(tmp_path / "enc"), format="huggingface")
    encoder_only = safetensors.numpy.load((tmp_path / "enc" / "model.safetensors").read_bytes())
    assert tensors.keys() - {QA_WEIGHT, QA_BIAS} == encoder_only.keys()
    for name, value in encoder_only.items():
        np.testing.assert_array_equal(tensors[name], value)
    logits = sequence @ tensors[QA_WEIGHT].T + tensors[QA_BIAS]
    want = task(inputs, training=False)
    np.testing.assert_allclose(logits[..., 0], want["start_logits"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(logits[..., 1], want["end_logits"], rtol=1e-5, atol=1e-5)
    assert np.ptp(logits[..., 0]) > 0.1 and np.abs(logits[..., 0] - logits[..., 1]).max() > 0.5


def test_rewrite_over_an_earlier_directory_and_a_task_without_vocabulary(tmp_path):
    task = tiny_task()
    task.build()
    out = tmp_path / "hf"
    write_squad_task_hf(task, str(out))
    first = (out / "model.safetensors").read_bytes()
    write_squad_task_hf(task, str(out))  # over a complete directory: the same files again
    assert (out / "model.safetensors").read_bytes() == first and (out / "config.json").is_file()
    task.preprocessor = None
    with pytest.raises(ValueError, match="needs the task's preprocessor"):
        write_squad_task_hf(task, str(tmp_path / "none"))
    assert not (tmp_path / "none" / "config.json").exists()
