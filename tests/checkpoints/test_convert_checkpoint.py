"""Smoke test of recipes/convert_checkpoint.py on a tiny google-research checkpoint."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_bert.checkpoints import load_encoder
from tests.checkpoints.helpers import hf_to_google, random_hf_weights, write_google_dir
from tests.checkpoints.test_loaders import CFG, FEATURES
from tests.conftest import REPO_ROOT


@pytest.mark.slow  # a subprocess importing TensorFlow: ~20 s on 2 shared cores
def test_convert_google_checkpoint(tmp_path, uncased_vocab):
    source = tmp_path / "uncased_L-2_H-8_A-2"
    write_google_dir(source, CFG, hf_to_google(random_hf_weights(CFG, heads=True)))
    out = tmp_path / "out"
    subprocess.run([sys.executable, str(REPO_ROOT / "recipes" / "convert_checkpoint.py"),
                    f"--init_checkpoint={source}", f"--output_dir={out}",
                    f"--vocab_file={uncased_vocab}"], check=True, cwd=REPO_ROOT,
                   env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    report = json.loads((out / "conversion.json").read_text())
    assert report["format"] == "google" and report["flags"]["do_lower_case"] is True
    assert report["flags"]["hidden_activation"] == "gelu_approximate"
    assert len(report["used"]) == 2 * 16 + 7 + 7
    assert len(report["ignored"]) == 2 * len(report["used"]) + 1  # adam_m, adam_v, global_step
    converted, original = load_encoder(str(out)), load_encoder(str(source))
    assert converted.bert_config == original.bert_config
    np.testing.assert_array_equal(converted(FEATURES)["sequence_output"],
                                  original(FEATURES)["sequence_output"])
