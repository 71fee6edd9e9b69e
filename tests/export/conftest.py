"""Shared, session-scoped exports for the export tests (tiny models, real uncased vocab).

Three exports, then ONE fresh `python -I` process (tensorflow only) loads all of them and calls
every signature; the tests compare its results with the in-process Keras model:
- "cls":  single-text, 3 labels, `task.export(version=None)` into a base dir that already
          holds version 3, a temporary dir and a non-integer dir (so it must become version 4);
- "reg":  sentence-pair regression, explicit version 7;
- "cli":  sentence-pair classification exported by `python -m export` with only its three
          required flags from a fine-tuning output_dir (best_model.keras alone) -> version 1.
"""

import os
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest

from tests.processes import run_checked

REPO = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
MAX_SEQ_LENGTH = 16  # tokens per packed text (serving_default)
MAX_POSITIONS = 24  # the encoder's max_sequence_length (position table)
LABELS3 = ["negative", "neutral", "positive"]
NLI = ["entailment", "not_entailment"]
TEXTS = ["A gripping, beautifully acted film.", "It's a dull, lifeless mess.", "naïve café"]
TEXTS_B = ["The film is gripping.", "The movie is boring and far too long for anyone.", "No."]
WARMUP = [("warm up one .", "warm up two ."), ("a rather long warm up sentence for padding", "b")]


def tiny_classifier(
    num_classes,
    label_names,
    task_name,
    seed,
    vocab_file=None,
    is_pair=False,
    num_layers=2,
    for_export=False,
):
    """TextClassifier on a `num_layers`-layer H=8 encoder (tests/tiny.py's, over the 30522-piece
    uncased vocab, MAX_POSITIONS positions) with N(0, 0.5) weights drawn with `seed` (so outputs
    differ per text; seed None: the initializers' weights); dropout 0.1 stays in the model, so a
    serving path that trains would not match. With a vocab file, the task carries its
    preprocessor (max_seq_length MAX_SEQ_LENGTH). Built by `build()`, or with `for_export` by
    `build_for_export()` (one call on its dummy inputs)."""
    from keras_bert.tasks import TextClassifier
    from keras_bert.tokenization import BertPreprocessor
    from tests.tiny import tiny_encoder

    encoder = tiny_encoder(
        vocab_size=30522, num_layers=num_layers, max_sequence_length=MAX_POSITIONS
    )
    preprocessor = (
        None
        if vocab_file is None
        else BertPreprocessor(vocab_file, do_lower_case=True, max_seq_length=MAX_SEQ_LENGTH)
    )
    model = TextClassifier(
        encoder,
        num_classes,
        label_names=label_names,
        task_name=task_name,
        preprocessor=preprocessor,
        is_pair=is_pair,
    )
    if for_export:
        model.build_for_export()
    else:
        model.build()
    if seed is not None:
        rng = np.random.default_rng(seed)
        for w in model.weights:
            w.assign(rng.normal(0.0, 0.5, w.shape).astype("float32"))
    return model


def export_command(model_dir, export_base, model_name, *flags) -> list[str]:
    """`python -m export` (run it from REPO) with its three required flags, then `flags`."""
    return [
        sys.executable,
        "-m",
        "export",
        f"--model_dir={model_dir}",
        f"--export_dir={export_base}",
        f"--model_name={model_name}",
        *map(str, flags),
    ]


def run_export(model_dir, export_base, model_name, *flags, timeout=600, **run):
    """Runs `export_command(...)` from the repository root and waits at most `timeout` seconds;
    `run`: more subprocess.run arguments (env). Returns the finished process (text output)."""
    return subprocess.run(
        export_command(model_dir, export_base, model_name, *flags),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        **run,
    )


def _bytes(texts):
    return (
        np.array([t.encode("utf-8") for t in texts], dtype=object)
        if texts
        else np.array([], dtype="S1")
    )


def _example_bytes(a, b=None):
    import tensorflow as tf

    out = []
    for i, text in enumerate(a):
        feature = {"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))}
        if b is not None:
            feature["text_b"] = tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[b[i].encode()])
            )
        out.append(
            tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
        )
    return np.array(out, dtype=object)


def read_warmup(version_dir):
    """The PredictionLog records of a version dir, parsed with tensorflow-serving-api."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    path = pathlib.Path(version_dir) / "assets.extra" / "tf_serving_warmup_requests"
    return [
        prediction_log_pb2.PredictionLog.FromString(r.numpy())
        for r in tf.data.TFRecordDataset(str(path))
    ]


def warmup_calls(logs):
    """PredictionLogs -> loader calls (signature name, numpy inputs), as TF Serving replays them."""
    import tensorflow as tf

    calls = {}
    for i, log in enumerate(logs):
        kind = log.WhichOneof("log_type")
        req = getattr(log, kind).request
        if kind == "predict_log":
            inputs = {k: tf.make_ndarray(v) for k, v in req.inputs.items()}
        else:
            inputs = {
                "inputs": np.array(
                    [e.SerializeToString() for e in req.input.example_list.examples], dtype=object
                )
            }
        calls[f"warmup_{i}"] = ("signature", req.model_spec.signature_name, inputs)
    return calls


@pytest.fixture(scope="session")
def exports(tmp_path_factory, uncased_vocab):
    """Runs the three exports and the fresh-process loader; returns everything tests need."""
    import tensorflow as tf

    from keras_bert.tokenization import BertPreprocessor

    root = tmp_path_factory.mktemp("export")
    base = root / "models"

    # "cli": save a fine-tuning output_dir (the task alone) and run the CLI with its three flags.
    run_dir = root / "run"
    run_dir.mkdir()
    cli_model = tiny_classifier(2, NLI, "rte", seed=3, vocab_file=uncased_vocab, is_pair=True)
    cli_model.save(run_dir / "best_model.keras")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cli = subprocess.Popen(
        export_command(run_dir, base, "rte"),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    # "cls": the next version after an existing 3, ignoring non-version entries.
    for d in ("3", ".tmp-5-crashed", "latest"):
        (base / "cls" / d).mkdir(parents=True)
    cls_model = tiny_classifier(3, LABELS3, "own_sentiment", seed=1, vocab_file=uncased_vocab)
    cls_dir = pathlib.Path(cls_model.export(base, "cls", warmup_texts=WARMUP))
    reg_model = tiny_classifier(1, None, "stsb", seed=2, vocab_file=uncased_vocab, is_pair=True)
    reg_dir = pathlib.Path(reg_model.export(base, "reg", version=7, warmup_texts=WARMUP))
    cli_out, _ = cli.communicate(timeout=600)
    assert cli.returncode == 0, cli_out[-3000:]
    cli_dir = base / "rte" / "1"

    pre = BertPreprocessor(uncased_vocab, do_lower_case=True, max_seq_length=MAX_SEQ_LENGTH)
    ids1 = {k: v.numpy() for k, v in pre(tf.constant(TEXTS)).items()}
    ids2 = {
        k: v.numpy()
        for k, v in pre({"text": tf.constant(TEXTS), "text_b": tf.constant(TEXTS_B)}).items()
    }
    short = {k: v[:, :7] for k, v in ids1.items()}  # dynamic T < max_seq_length
    too_long = {k: np.zeros([1, MAX_POSITIONS + 1], np.int32) for k in ids1}
    bad_id = {k: v[:1].copy() for k, v in ids1.items()}
    bad_id["input_word_ids"][0, 1] = 30522  # == vocab_size
    text_a, text_b = _bytes(TEXTS), _bytes(TEXTS_B)
    calls = {
        "cls": {
            "default": ("signature", "serving_default", {"text": text_a}),
            "default_b1": ("signature", "serving_default", {"text": text_a[:1]}),
            "default_b0": ("signature", "serving_default", {"text": _bytes([])}),
            "encoded": ("signature", "encoded", ids1),
            "encoded_short": ("signature", "encoded", short),
            "encoded_int64_fn": (
                "function",
                "encoded",
                {k: v.astype(np.int64) for k, v in ids1.items()},
            ),
            "encoded_too_long": ("signature", "encoded", too_long),
            "encoded_bad_id": ("signature", "encoded", bad_id),
            "classify": ("signature", "classification", {"inputs": _example_bytes(TEXTS)}),
            **warmup_calls(read_warmup(cls_dir)),
        },
        "reg": {
            "default": ("signature", "serving_default", {"text": text_a, "text_b": text_b}),
            "default_b1": (
                "signature",
                "serving_default",
                {"text": text_a[:1], "text_b": text_b[:1]},
            ),
            "encoded": ("signature", "encoded", ids2),
            "regress": ("signature", "regression", {"inputs": _example_bytes(TEXTS, TEXTS_B)}),
            **warmup_calls(read_warmup(reg_dir)),
        },
        "cli": {
            "default": ("signature", "serving_default", {"text": text_a, "text_b": text_b}),
            "classify": ("signature", "classification", {"inputs": _example_bytes(TEXTS, TEXTS_B)}),
            **warmup_calls(read_warmup(cli_dir)),
        },
    }
    dirs = {"cls": cls_dir, "reg": reg_dir, "cli": cli_dir}
    spec = {k: {"dir": str(dirs[k]), "calls": calls[k]} for k in dirs}
    (root / "spec.pkl").write_bytes(pickle.dumps(spec))
    run_checked(
        [
            sys.executable,
            "-I",
            str(HERE / "_load_and_call.py"),
            str(root / "spec.pkl"),
            str(root / "out.pkl"),
        ],
        timeout=600,
        cwd=root,
        env=env,
    )
    return {
        "base": base,
        "dirs": dirs,
        "calls": calls,
        "loaded": pickle.loads((root / "out.pkl").read_bytes()),
        "models": {"cls": cls_model, "reg": reg_model, "cli": cli_model},
        "preprocessor": pre,
        "ids1": ids1,
        "ids2": ids2,
        "short": short,
    }
