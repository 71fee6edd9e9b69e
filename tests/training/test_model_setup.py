"""Casing against the checkpoint (google-research's validate_case_matches_checkpoint rule)."""

import re

import pytest

from keras_bert.training.model_setup import check_casing


def test_explicit_casing_that_contradicts_the_checkpoint_is_refused():
    message = (
        "--do_lower_case=False contradicts --init_checkpoint=minilm_l6_h384_uncased: that "
        "checkpoint is uncased (do_lower_case=True); drop --do_lower_case or pass "
        "--do_lower_case=True"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        check_casing(False, "minilm_l6_h384_uncased")
    assert check_casing(True, "minilm_l6_h384_uncased") is True
    assert check_casing(None, "minilm_l6_h384_uncased") is True


def test_google_directory_names_give_the_casing(tmp_path):
    from tests.checkpoints.helpers import hf_to_google, random_hf_weights, write_google_dir

    cfg = {
        "vocab_size": 23,
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 12,
        "max_position_embeddings": 16,
        "type_vocab_size": 2,
    }
    cased = tmp_path / "cased_L-1_H-8_A-2"
    write_google_dir(cased, cfg, hf_to_google(random_hf_weights(cfg)))
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"--do_lower_case=True contradicts --init_checkpoint={cased}: that checkpoint is cased "
            "(do_lower_case=False)"
        ),
    ):
        check_casing(True, str(cased))
    assert check_casing(None, str(cased)) is False


def test_unknown_casing_warns_and_keeps_the_explicit_value(tmp_path, caplog):
    unknown = tmp_path / "my_checkpoint"
    unknown.mkdir()
    assert check_casing(False, str(unknown)) is False
    assert check_casing(None, str(unknown)) is True
    assert "cannot tell whether --init_checkpoint" in caplog.text
    assert check_casing(False, None) is False and check_casing(None, None) is True
