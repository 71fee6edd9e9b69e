"""Smoke test of recipes/convert_checkpoint.py on a tiny google-research checkpoint."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_bert.checkpoints import load_encoder
from tests.checkpoints.helpers import (
    hf_to_google,
    keras_hub_outputs,
    random_hf_weights,
    random_keras_hub_backbone,
    write_google_dir,
)
from tests.checkpoints.test_loaders import CFG, FEATURES
from tests.conftest import REPO_ROOT


def _convert_checkpoint(source, output_dir, vocab_file, *flags):
    """Run recipes/convert_checkpoint.py on `source` in a fresh Python, as a user would run it."""
    subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "recipes" / "convert_checkpoint.py"),
            f"--init_checkpoint={source}",
            f"--output_dir={output_dir}",
            f"--vocab_file={vocab_file}",
            *flags,
        ],
        check=True,
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
    )


@pytest.mark.slow  # a subprocess importing TensorFlow: ~20 s on 2 shared cores
def test_convert_google_checkpoint(tmp_path, uncased_vocab):
    source = tmp_path / "uncased_L-2_H-8_A-2"
    write_google_dir(source, CFG, hf_to_google(random_hf_weights(CFG, heads=True)))
    out = tmp_path / "out"
    _convert_checkpoint(source, out, uncased_vocab)
    report = json.loads((out / "conversion.json").read_text())
    assert report["format"] == "google" and report["flags"]["do_lower_case"] is True
    assert report["flags"]["hidden_activation"] == "gelu_approximate"
    assert len(report["used"]) == 2 * 16 + 7 + 7
    assert len(report["ignored"]) == 2 * len(report["used"]) + 1  # adam_m, adam_v, global_step
    converted, original = load_encoder(str(out)), load_encoder(str(source))
    assert converted.bert_config == original.bert_config
    np.testing.assert_array_equal(
        converted(FEATURES)["sequence_output"], original(FEATURES)["sequence_output"]
    )


@pytest.mark.slow  # a subprocess importing TensorFlow and keras-hub: ~25 s on 2 shared cores
def test_convert_keras_hub_preset_to_huggingface(tmp_path, uncased_vocab):
    """A keras-hub preset in, a Hugging Face directory out, detected from the files."""
    backbone = random_keras_hub_backbone(seed=11)
    source = tmp_path / "preset"
    backbone.save_to_preset(str(source))
    out = tmp_path / "hf"
    _convert_checkpoint(
        source, out, uncased_vocab, "--do_lower_case=true", "--output_format=huggingface"
    )
    report = json.loads((out / "conversion.json").read_text())
    assert report["format"] == "keras_hub" and report["flags"]["output_format"] == "huggingface"
    assert set(report["used"]) == {v.path for v in backbone.weights} and report["ignored"] == {}
    assert json.loads((out / "config.json").read_text())["hidden_act"] == "gelu_new"
    reference_sequence, reference_pooled = keras_hub_outputs(backbone)
    ours = load_encoder(str(out))(FEATURES)
    mask = FEATURES["input_mask"].astype(bool)
    np.testing.assert_allclose(
        np.asarray(ours["sequence_output"])[mask], reference_sequence[mask], atol=1e-5
    )
    np.testing.assert_allclose(ours["pooled_output"], reference_pooled, atol=1e-5)
