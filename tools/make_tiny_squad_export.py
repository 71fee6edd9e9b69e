"""Smoke-test helper for bench_serving --scenario=squad: a tiny random-weight SQuAD export.

Builds a `SpanQuestionAnswerer` on a tiny random `BertEncoder` (hidden 32, 2 layers, seed 0)
with the real MiniLM uncased vocabulary (so SQuAD contexts tokenize as in a real run) and the
recipe's windowing (max_seq_length 384, doc_stride 128, max_query_length 64), and exports it
with `task.export(base, name)` (as tests/tasks/test_span_question_answerer.py does). Its answers
are random spans: useful for plumbing and offset checks, never for EM or speed of a real model.

    python -m tools.make_tiny_squad_export "$TMPDIR"/tiny_squad_models [--model_name=squad]
    # then --model_dir="$TMPDIR"/tiny_squad_models/squad/<version>
"""

import os

from absl import app, flags

from benchmarks import common
from keras_bert import cli, fileio

FLAGS = flags.FLAGS
flags.DEFINE_string("model_name", "squad", "Model name (sub-directory of the export base).")


def main(argv):
    if len(argv) != 2:
        raise app.UsageError("give the export base directory")
    base = argv[1]
    if not base.strip():
        raise app.UsageError("the export base directory is empty")
    import keras
    from keras_bert.checkpoints import resolve_vocab_file
    from keras_bert.models.bert_encoder import BertEncoder
    from keras_bert.saved_model.exporter import check_model_name_and_version
    from keras_bert.tasks.span_question_answerer import SpanQuestionAnswerer
    from keras_bert.tokenization.bert_preprocessor import BertPreprocessor

    try:
        check_model_name_and_version(FLAGS.model_name, None)
    except ValueError as e:
        raise app.UsageError(f"--model_name: {e}") from None
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor(
        resolve_vocab_file(common.PRESET), do_lower_case=True, max_seq_length=384
    )
    encoder = BertEncoder(
        vocab_size=len(pre.vocabulary),
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=48,
        max_sequence_length=512,
    )
    task = SpanQuestionAnswerer(encoder, pre, doc_stride=128, max_query_length=64)
    task(common.random_batch(1, 8))
    try:
        print(task.export(base, FLAGS.model_name))
    except fileio.file_errors() as e:
        cli.fail_usage(f"cannot export into {base}: {e}")


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    cli.run(main)
