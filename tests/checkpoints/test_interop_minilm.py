"""The real MiniLM-L6-H384 checkpoint through every format and back (slow).

Out: our Hugging Face, google-research and keras-hub writers. Through the other libraries:
keras-hub's `BertBackbone.from_preset` on our preset; tf-models-official's converter on our
google-research checkpoint (Model Garden TF2). In: our readers on each, compared with that
library's own forward pass. The TF Hub SavedModel path is tested on a tiny encoder
(test_interop_readers.py); its MiniLM figure in docs/checkpoints.md was measured once.
"""

import shutil

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.checkpoints import load_encoder, resolve_vocab_file, save_encoder
from keras_bert.tokenization import FullTokenizer

pytestmark = pytest.mark.slow

PRESET = "minilm_l6_h384_uncased"
SENTENCES = [
    ("The quick brown fox jumps over the lazy dog.", None),
    ("How old are you?", "I am six years old, and my sister is nine."),
    ("Hello!", None),
    ("Unaffable critics rarely praise naïve cafés in Zürich.", "They prefer the hotels."),
]


@pytest.fixture(scope="module")
def features():
    tok = FullTokenizer(resolve_vocab_file(PRESET), do_lower_case=True)
    rows = [tok.encode(a, b, max_seq_length=24) for a, b in SENTENCES]
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def _outputs(model_outputs):
    return (
        np.asarray(model_outputs["sequence_output"]),
        np.asarray(model_outputs["pooled_output"]),
    )


def _max_diff(a, b, features):
    mask = features["input_mask"].astype(bool)
    return max(float(np.abs(a[0][mask] - b[0][mask]).max()), float(np.abs(a[1] - b[1]).max()))


def test_minilm_every_format(tmp_path, features):
    import keras_hub
    from official.legacy.bert import configs
    from official.nlp.tools import export_tfhub_lib
    from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter

    vocab = resolve_vocab_file(PRESET)
    exact = load_encoder(PRESET)
    tanh = load_encoder(PRESET, hidden_activation="gelu_approximate")
    exact_out, tanh_out = _outputs(exact(features)), _outputs(tanh(features))

    hf = save_encoder(exact, tmp_path / "hf", vocab, True, format="huggingface")
    assert _max_diff(_outputs(load_encoder(hf)(features)), exact_out, features) == 0.0
    google = save_encoder(tanh, tmp_path / "uncased_google", vocab, format="google")
    assert _max_diff(_outputs(load_encoder(google)(features)), tanh_out, features) == 0.0

    preset = save_encoder(tanh, tmp_path / "keras_hub", vocab, True, format="keras_hub")
    backbone = keras_hub.models.BertBackbone.from_preset(preset)
    keras_hub_out = _outputs(
        backbone(
            {
                "token_ids": features["input_word_ids"],
                "segment_ids": features["input_type_ids"],
                "padding_mask": features["input_mask"],
            }
        )
    )
    assert _max_diff(keras_hub_out, tanh_out, features) <= 1e-5  # 4.3e-6 measured
    assert _max_diff(_outputs(load_encoder(preset)(features)), keras_hub_out, features) <= 1e-5

    bert_config = configs.BertConfig.from_json_file(f"{google}/bert_config.json")
    garden = tmp_path / "model_garden"
    converter.convert_checkpoint(
        bert_config,
        str(garden / "bert_model.ckpt"),
        f"{google}/bert_model.ckpt",
        checkpoint_model_name="encoder",
        converted_model="encoder",
    )
    shutil.copy(f"{google}/bert_config.json", garden)
    garden_encoder = export_tfhub_lib.get_bert_encoder(bert_config)
    prefix = tf.train.latest_checkpoint(str(garden))
    tf.train.Checkpoint(encoder=garden_encoder).restore(prefix).assert_existing_objects_matched()
    garden_out = _outputs(garden_encoder(features, training=False))
    assert _max_diff(_outputs(load_encoder(garden)(features)), garden_out, features) <= 1e-5
