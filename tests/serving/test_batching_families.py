"""Batched answers are each request's own for every exported family's signatures.

A batching server (`--enable_batching`, 4 rows per call, a 5 s batch timeout, so that each group
of concurrent requests below, 4 rows in all, fills one call at once) serves tiny exports of the
four task families: token classifier (its `encoded` also from LiteRT), span QA, multiple choice and
text classifier. Each request's answer equals the same request run alone in process (no batching):
the same outputs with the same shapes, strings and integers exactly, floats within
tests/tolerance.py. The Prometheus batch series show which signatures merged (one call per group)
and that the token classifier's `serving_default`, whose `tags` / `words` are as wide as the call's
longest sentence, never merged.
"""

import concurrent.futures
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.example import example_pb2

from serving.dispatch.batching import call_sized_outputs
from serving.models.servable import LiteRtServable, read_signatures
from tests.evaluation.tiny_task import tiny_chooser, tiny_classifier, tiny_reader, tiny_tagger
from tests.serving.test_batching import _scrape as scrape
from tests.serving.test_grpc_api import outputs, predict_request, prediction_stub
from tests.tolerance import assert_close_across_paths

ROWS_PER_CALL = 4


def _ids(lengths, width, seed, choices=0):
    """`encoded` inputs: row i holds lengths[i] random word pieces then padding to `width`; with
    `choices`, each row is [choices, width] (every choice as long)."""
    rng = np.random.default_rng(seed)
    lengths = np.array(lengths).reshape([-1] + [1] * (2 if choices else 1))
    shape = [len(lengths)] + ([choices] if choices else []) + [width]
    mask = (np.arange(width) < lengths).astype(np.int32) * np.ones(shape, np.int32)
    words = rng.integers(1000, 30000, shape).astype(np.int32) * mask
    return {"input_word_ids": words, "input_mask": mask, "input_type_ids": np.zeros_like(mask)}


def _texts(*texts):
    return np.array([t.encode() for t in texts], dtype=object)


def _examples(*texts):
    serialized = []
    for text in texts:
        example = example_pb2.Example()
        example.features.feature["text"].bytes_list.value.append(text.encode())
        serialized.append(example.SerializeToString())
    return np.array(serialized, dtype=object)


ENDINGS = ["starts pulling up roofing .", "is ripping tiles off .", "holds a cube .", "rests ."]
# (model, signature, concurrent requests of 4 rows in all): each group is one merged call, except
# the token classifier's serving_default, whose widths only the whole call decides.
GROUPS = [
    (
        "tagger",
        "serving_default",
        [
            {"text": _texts("EU rejects")},  # 2 words, beside an 11-word sentence
            {"text": _texts("Peter Blackburn went to the bank in London on a Monday", "a dog", "")},
        ],
    ),
    ("tagger", "encoded", [_ids([3], 16, 0), _ids([16, 5, 9], 16, 1)]),
    ("tagger_lite", "encoded", [_ids([4, 12], 10, 2), _ids([2, 10], 10, 3)]),
    (
        "reader",
        "serving_default",
        [
            {"question": _texts("who wrote it ?"), "context": _texts("Ada wrote it .")},
            {
                "question": _texts("when ?", "where is paris ?", "what ?"),
                "context": _texts(
                    "It was written by Ada Lovelace in 1843 for the analytical engine of "
                    "Charles Babbage , who worked in London , far from Paris .",
                    "Paris is the capital of France .",
                    "",
                ),
            },
        ],
    ),
    ("reader", "encoded", [_ids([20], 24, 4), _ids([6, 24, 11], 24, 5)]),
    (
        "chooser",
        "serving_default",
        [
            {"context": _texts("A man is on a roof . He"), "endings": np.array([ENDINGS], object)},
            {
                "context": _texts(
                    "A chef chops onions and then , slowly , the garlic . He", "x", ""
                ),
                "endings": np.array([ENDINGS[::-1], ["a", "b", "c", "d"], [""] * 4], object),
            },
        ],
    ),
    ("chooser", "encoded", [_ids([3, 12], 12, 6, choices=4), _ids([7, 5], 12, 7, choices=4)]),
    (
        "clf",
        "serving_default",
        [
            {"text": _texts("a gripping film")},
            {"text": _texts("dull", "x", "it is fine , i guess")},
        ],
    ),
    ("clf", "encoded", [_ids([2, 9], 9, 8), _ids([4, 6], 9, 9)]),
    (
        "clf",
        "classification",
        [{"inputs": _examples("a great film", "awful")}, {"inputs": _examples("ok", "")}],
    ),
]
MERGED = {(m, s) for m, s, _ in GROUPS} - {("tagger", "serving_default")}


@pytest.fixture(scope="module")
def family_exports(tmp_path_factory, uncased_vocab):
    """(base dir with models.config, {model name: version dir}). "tagger" and "tagger_lite" are
    one export: the SavedModel alone, and its model.tflite (served by LiteRT). Warmup records are
    removed, so that no warmup request waits for a batch to fill."""
    base = tmp_path_factory.mktemp("families")
    tasks = {
        "tagger": (tiny_tagger(uncased_vocab, seed=2), "float32"),
        "reader": (tiny_reader(uncased_vocab, seed=3), None),
        "chooser": (tiny_chooser(uncased_vocab, seed=5), None),
        "clf": (tiny_classifier(uncased_vocab, seed=1, num_layers=1), None),
    }
    paths = {name: task.export(base, name, litert=litert) for name, (task, litert) in tasks.items()}
    paths["tagger_lite"] = str(base / "tagger_lite" / "1")
    shutil.copytree(paths["tagger"], paths["tagger_lite"])
    (base / "tagger" / "1" / "model.tflite").unlink()
    for path in paths.values():
        shutil.rmtree(f"{path}/assets.extra", ignore_errors=True)
    configs = "".join(
        f'config {{ name: "{name}" base_path: "{base / name}" model_platform: "tensorflow" }}\n'
        for name in paths
    )
    (base / "models.config").write_text(f"model_config_list {{\n{configs}}}\n")
    return base, paths


def _alone(paths):
    """alone(model, signature, inputs) -> each request run by itself in process."""
    loaded = {}

    def run(model, signature, inputs):
        if model not in loaded:
            if model == "tagger_lite":
                loaded[model] = LiteRtServable(model, 1, paths[model])
            else:
                loaded[model] = tf.saved_model.load(paths[model])
        if model == "tagger_lite":
            return loaded[model].run(signature, inputs)
        fn = loaded[model].signatures[signature]
        return {
            k: v.numpy() for k, v in fn(**{k: tf.constant(v) for k, v in inputs.items()}).items()
        }

    return run


def _batch_series(server):
    """{(model, signature): (calls, rows)} of the server's serving_batch_size histogram."""
    text, _ = scrape(server)
    found = {}
    for kind, model, signature, value in re.findall(
        r'serving_batch_size_(count|sum)\{model="(\w+)",signature="(\w+)"\} (\S+)', text
    ):
        found.setdefault((model, signature), {})[kind] = float(value)
    return {key: (v["count"], v["sum"]) for key, v in found.items()}


@pytest.mark.slow
def test_every_family_answers_merged_requests_as_alone(family_exports, start_server, tmp_path):
    base, paths = family_exports
    params = tmp_path / "batching.config"
    params.write_text(
        f"max_batch_size {{ value: {ROWS_PER_CALL} }} batch_timeout_micros {{ value: 5000000 }} "
        "num_batch_threads { value: 2 } max_enqueued_batches { value: 100 }"
    )
    server = start_server(
        [
            f"--model_config_file={base / 'models.config'}",
            "--enable_batching",
            f"--batching_parameters_file={params}",
            "--prefer_tflite_model",
            "--file_system_poll_wait_seconds=0",
        ]
    )
    signatures = {
        (model, key): signature
        for model, path in paths.items()
        for key, signature in (
            LiteRtServable(model, 1, path).signatures
            if model == "tagger_lite"
            else read_signatures(path)
        ).items()
    }
    assert sorted(signatures) == sorted((m, s) for m, s, _ in GROUPS)  # every exported signature
    assert {k: call_sized_outputs(s) for k, s in signatures.items() if call_sized_outputs(s)} == {
        ("tagger", "serving_default"): ["tags", "words"]
    }
    alone = _alone(paths)
    with prediction_stub(server.grpc_target) as stub:
        for model, signature, requests in GROUPS:
            assert sum(len(next(iter(r.values()))) for r in requests) == ROWS_PER_CALL

            def predict(inputs, model=model, signature=signature):
                request = predict_request(model=model, signature=signature, **inputs)
                return outputs(stub.Predict(request, timeout=60))

            with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
                got = list(pool.map(predict, requests))  # any RpcError fails the test
            for i, (inputs, answer) in enumerate(zip(requests, got)):
                want = alone(model, signature, inputs)
                where = f"{model} {signature} request {i}"
                assert sorted(answer) == sorted(want), where
                for name, value in want.items():
                    assert answer[name].shape == value.shape, f"{where}: {name}"
                    if value.dtype.kind == "f":
                        assert_close_across_paths(answer[name], value, err_msg=f"{where}: {name}")
                    else:
                        np.testing.assert_array_equal(answer[name], value, f"{where}: {name}")
    series = _batch_series(server)
    # One call of 4 rows per merged group; the tagger's text signature is not batched at all.
    assert series == {key: (1.0, float(ROWS_PER_CALL)) for key in MERGED}
    tags = alone("tagger", "serving_default", GROUPS[0][2][0])["tags"]
    assert tags.shape == (1, 2)  # the short request alone, as the server answered it
