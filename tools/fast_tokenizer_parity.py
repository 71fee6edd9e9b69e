"""tensorflow-text's FastBertTokenizer against BERT's reference tokenization, and its LiteRT run.

The question behind it (docs/export.md, "LiteRT"): could a LiteRT version answer text by carrying
FastBertTokenizer, whose ops tensorflow-text implements for LiteRT? Two checks:

1. Parity: every SST-2 dev sentence and every SQuAD v1.1 dev context and question, tokenized by
   `keras_bert.tokenization.FullTokenizer` (the reference rule, which the models are trained
   with) and by `FastBertTokenizer(lower_case_nfd_strip_accents=True)` on the uncased
   vocabulary. Prints the number of texts whose ids differ, per source, and the differing pieces
   (reference -> fast), most frequent first.
2. LiteRT: the FastBertTokenizer function converted with custom ops and run by `ai-edge-litert`'s
   `InterpreterWithCustomOps` with tensorflow-text's registrar, on the texts of check 1 that
   differ and a few that do not: the ids equal TensorFlow's run of the same function.

    python -m tools.fast_tokenizer_parity [--vocab_file=...] [--litert_texts=64]
"""

from __future__ import annotations

import collections
import difflib

import numpy as np
from absl import flags

from benchmarks import common
from keras_bert import cli
from keras_bert.cli import fail_usage
from keras_bert.training.arg_flags import check_input_file

FLAGS = flags.FLAGS
flags.DEFINE_string("vocab_file", None, "Uncased vocab.txt (default: the shared data's).")
flags.DEFINE_integer("litert_texts", 64, "Texts run through the LiteRT flatbuffer (check 2).")
flags.DEFINE_integer("max_length", 512, "Ids per text in the LiteRT function (padded, cut).")
common.bounds(litert_texts=1, max_length=2)


def texts_by_source(data_dir: str) -> dict[str, list[str]]:
    from keras_bert import fileio
    from keras_bert.data.glue import read_glue

    squad = fileio.read_json(f"{data_dir}/squad/dev-v1.1.json")["data"]
    paragraphs = [p for a in squad for p in a["paragraphs"]]
    return {
        "SST-2 dev sentences": [e.text_a for e in read_glue("sst2", "dev", data_dir)],
        "SQuAD v1.1 dev contexts": [p["context"] for p in paragraphs],
        "SQuAD v1.1 dev questions": [q["question"] for p in paragraphs for q in p["qas"]],
    }


def main(argv):
    del argv
    cli.require_reachable_flags("vocab_file")
    import tensorflow as tf
    import tensorflow_text as tf_text
    from ai_edge_litert import interpreter as litert

    from keras_bert import fileio
    from keras_bert.tokenization.full_tokenizer import UNK_TOKEN, FullTokenizer

    data_dir = str(common.data_dir())
    given = FLAGS.vocab_file is not None
    vocab_file = FLAGS.vocab_file if given else f"{data_dir}/vocab/bert-base-uncased-vocab.txt"
    try:
        check_input_file("vocab_file", vocab_file)
        reference = FullTokenizer(vocab_file, do_lower_case=True)  # refuses an empty or binary file
        if UNK_TOKEN not in reference.vocab:
            raise ValueError(f"{vocab_file}: the vocabulary lacks the {UNK_TOKEN} token")
    except (FileNotFoundError, ValueError) as e:
        fail_usage(f"{e}" if given else f"{e} (the default under KERAS_BERT_DATA_DIR={data_dir})")
    try:
        by_source = texts_by_source(data_dir)
    except (FileNotFoundError, ValueError) as e:
        fail_usage(f"the data under KERAS_BERT_DATA_DIR={data_dir}: {e}")
    vocab = fileio.text_lines(fileio.read_user_text(vocab_file))
    fast = tf_text.FastBertTokenizer(
        vocab=vocab, token_out_type=tf.int64, lower_case_nfd_strip_accents=True
    )
    pieces = collections.Counter()
    differing, same = [], []
    for source, texts in by_source.items():
        count = 0
        for start in range(0, len(texts), 512):
            chunk = texts[start : start + 512]
            for text, got in zip(chunk, fast.tokenize(tf.constant(chunk)).to_list()):
                want = reference.tokenize(text)
                if reference.convert_tokens_to_ids(want) == got:
                    same.append(text)
                    continue
                count += 1
                differing.append(text)
                got_pieces = [vocab[i] for i in got]
                matcher = difflib.SequenceMatcher(a=want, b=got_pieces, autojunk=False)
                for op, a0, a1, b0, b1 in matcher.get_opcodes():
                    if op != "equal":
                        pieces[f"{' '.join(want[a0:a1])} -> {' '.join(got_pieces[b0:b1])}"] += 1
        print(f"{source}: {count} of {len(texts)} texts tokenize differently")
    print(f"all: {len(differing)} of {len(differing) + len(same)}")
    for change, n in pieces.most_common(20):
        print(f"  {n:4d}  {change}")

    length = FLAGS.max_length

    class Tokenize(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def tokenize(self, text):
            ids = fast.tokenize(text)
            return {"ids": ids.to_tensor(default_value=0, shape=[None, length])}

    module = Tokenize()
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.tokenize.get_concrete_function()], module
    )
    converter.allow_custom_ops = True
    flatbuffer = converter.convert()
    interpreter = litert.InterpreterWithCustomOps(
        custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS, model_content=flatbuffer
    )
    runner = interpreter.get_signature_runner()
    texts = (differing + same)[: FLAGS.litert_texts]
    got = runner(text=np.array([t.encode() for t in texts], dtype=object))["ids"]
    want = module.tokenize(tf.constant(texts))["ids"].numpy()
    print(
        f"LiteRT (ai-edge-litert InterpreterWithCustomOps, tensorflow-text registrar): "
        f"{len(texts)} texts, ids equal to TensorFlow's run: {bool(np.array_equal(got, want))}"
    )


if __name__ == "__main__":
    cli.run(main)
