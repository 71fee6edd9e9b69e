"""Feature extraction: layer parsing, values equal the encoder's own layer outputs, and
recipes/extract_features.py's JSON lines (google-research layout) from a saved checkpoint."""

import keras
import numpy as np
import pytest

from keras_bert import fileio
from keras_bert.checkpoints import save_encoder
from keras_bert.features import extract_features, parse_layers, split_pair
from keras_bert.tokenization import BertPreprocessor
from keras_bert.tokenization.full_tokenizer import FullTokenizer
from tests.recipes.on_ram import RESERVED
from tests.recipes.recipe_process import run_recipe
from tests.tiny import tiny_encoder

VOCAB = RESERVED + ["the", "cat", "sat", "on", "mat", "##s", "a", "dog", "."]
TEXTS = ["The cats sat on a mat.", "the dog ||| sat on the mat", "a dog", "qx the ||| ."]


def three_layer_encoder():
    """tests/tiny.py's encoder over `VOCAB` with 3 layers (features of several layers to pick),
    32 positions, seeded: the same weights each call."""
    keras.utils.set_random_seed(1)
    return tiny_encoder(
        vocab_size=len(VOCAB), num_layers=3, intermediate_size=16, max_sequence_length=32
    )


def test_parse_layers_and_pairs():
    assert parse_layers("-1,-2,-3,-4", 4) == [-1, -2, -3, -4]
    assert parse_layers("0, 2", 3) == [0, 2]
    with pytest.raises(ValueError, match=r"each index must be in \[-3, 2\] \(the encoder has 3"):
        parse_layers("-4", 3)
    with pytest.raises(ValueError, match="comma-separated integers"):
        parse_layers("last", 3)
    assert split_pair("a b ||| c") == ("a b", "c") and split_pair("a b") == ("a b", None)


@pytest.mark.slow
def test_values_are_the_layer_outputs_of_each_example_alone():
    encoder = three_layer_encoder()
    pre = BertPreprocessor(vocabulary=VOCAB, do_lower_case=True, max_seq_length=16)
    got = list(extract_features(encoder, pre, TEXTS, [-1, 0], batch_size=3))
    assert [t for t, _ in got][:2] == [
        ["[CLS]", "the", "cat", "##s", "sat", "on", "a", "mat", ".", "[SEP]"],
        ["[CLS]", "the", "dog", "[SEP]", "sat", "on", "the", "mat", "[SEP]"],
    ]
    for text, (tokens, values) in zip(TEXTS, got):
        a, b = split_pair(text)
        inputs = pre({"text": [a], "text_b": [b]}) if b is not None else pre([a])
        layers = encoder(inputs, training=False)["encoder_outputs"]
        n = len(tokens)
        assert int(inputs["input_mask"].numpy().sum()) == n
        np.testing.assert_allclose(values[-1], layers[-1][0, :n].numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(values[0], layers[0][0, :n].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_recipe_writes_google_layout_from_a_checkpoint(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    encoder = three_layer_encoder()
    checkpoint = save_encoder(encoder, tmp_path / "ckpt", vocab_file=str(vocab), do_lower_case=True)
    (tmp_path / "input.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / "features.jsonl"
    flags = [
        f"--input_file={tmp_path / 'input.txt'}",
        f"--output_file={out}",
        f"--init_checkpoint={checkpoint}",
        "--layers=-1,-2",
        "--max_seq_length=16",
        "--batch_size=2",
    ]
    proc = run_recipe("extract_features.py", *flags, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = fileio.read_jsonl(str(out))
    assert [x["linex_index"] for x in lines] == [0, 1, 2, 3]
    reference = FullTokenizer(str(vocab), do_lower_case=True)
    pre = BertPreprocessor(vocabulary=VOCAB, do_lower_case=True, max_seq_length=16)
    for text, line in zip(TEXTS, lines):
        a, b = split_pair(text)
        expected = ["[CLS]"] + reference.tokenize(a) + ["[SEP]"]
        if b is not None:
            expected += reference.tokenize(b) + ["[SEP]"]
        assert [f["token"] for f in line["features"]] == expected
        inputs = pre({"text": [a], "text_b": [b]}) if b is not None else pre([a])
        layers = encoder(inputs, training=False)["encoder_outputs"]
        for t, feature in enumerate(line["features"]):
            assert [x["index"] for x in feature["layers"]] == [-1, -2]
            for entry in feature["layers"]:
                np.testing.assert_allclose(
                    entry["values"], layers[entry["index"]][0, t].numpy(), atol=2e-6
                )
    bad_flags = [f for f in flags if not f.startswith("--layers")] + ["--layers=-9"]
    bad = run_recipe("extract_features.py", *bad_flags, timeout=300)
    assert bad.returncode == 2 and "each index must be in [-3, 2]" in bad.stderr + bad.stdout
    assert "Traceback" not in bad.stderr
