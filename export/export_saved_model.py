"""Versioned SavedModel export for TensorFlow Serving (SPEC section 7).

Layout written (what `tensorflow_model_server --model_base_path=EXPORT_BASE/<model_name>` and our
`serving.server` poll):

    EXPORT_BASE/<model_name>/<version>/      version: positive integer, next free one by default
        saved_model.pb, fingerprint.pb, variables/
        assets/vocab.txt                      WordPiece vocabulary used by the in-graph tokenizer
        assets/labels.txt                     label names in id order (classification only)
        assets/export_config.json             task, labels, tokenizer, BertConfig, signatures
        assets.extra/tf_serving_warmup_requests   TFRecord of tensorflow.serving.PredictionLog

Atomicity: everything is written under `EXPORT_BASE/<model_name>/.tmp-<version>-<random>/` (not an
integer name, so servers ignore it) and then renamed into place with one `os.rename`, which is
atomic on a POSIX file system; a crash leaves at most a hidden temporary directory and never a
half-written version. An existing version is never overwritten (`FileExistsError`).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from export import signatures as sigs

logger = logging.getLogger(__name__)

WARMUP_FILENAME = "tf_serving_warmup_requests"  # tensorflow_serving/servables/tensorflow/saved_model_warmup
CONFIG_FILENAME = "export_config.json"
DEFAULT_WARMUP_TEXTS = (
    ("a gripping , beautifully acted film .", "the film is gripping and well acted ."),
    ("it 's a dull , lifeless mess .", "the movie is boring ."),
)
TOKENIZERS = ("core", "tf_text")


# ---- versioned layout -------------------------------------------------------------------------

def existing_versions(model_dir: str | os.PathLike) -> list[int]:
    """Integer version directories under `model_dir`, ascending (other names are ignored)."""
    path = pathlib.Path(model_dir)
    if not path.is_dir():
        return []
    return sorted(int(p.name) for p in path.iterdir()
                  if p.is_dir() and p.name.isdigit() and int(p.name) > 0)


def next_version(model_dir: str | os.PathLike) -> int:
    """1 + the largest existing integer version under `model_dir` (1 when there is none)."""
    versions = existing_versions(model_dir)
    return versions[-1] + 1 if versions else 1


def publish(tmp_dir: str | os.PathLike, model_dir: str | os.PathLike, version: int) -> pathlib.Path:
    """Atomically renames a complete export `tmp_dir` to `model_dir/<version>`.

    Raises:
        FileExistsError: if `model_dir/<version>` exists (it is left untouched).
    """
    target = pathlib.Path(model_dir) / str(int(version))
    if target.exists():
        raise FileExistsError(f"version {version} already exists at {target}; "
                              "exported versions are never overwritten")
    try:
        os.rename(tmp_dir, target)  # fails on an existing non-empty dir (a racing writer)
    except OSError as e:
        if target.exists():
            raise FileExistsError(f"version {version} appeared at {target} while exporting") from e
        raise
    return target


def set_method_names(export_dir: str | os.PathLike, method_names: dict) -> None:
    """Rewrites `signature_def[key].method_name` in `export_dir/saved_model.pb`.

    TF2's `tf.saved_model.save` writes `tensorflow/serving/predict` for every signature; the
    Classify and Regress APIs of TensorFlow Serving need `tensorflow/serving/classify` /
    `tensorflow/serving/regress`. Also rewrites `fingerprint.pb`, whose checksum covers
    saved_model.pb.

    Raises:
        KeyError: naming a signature key that is not in the SavedModel.
    """
    from tensorflow.core.protobuf import saved_model_pb2

    path = pathlib.Path(export_dir) / "saved_model.pb"
    saved_model = saved_model_pb2.SavedModel.FromString(path.read_bytes())
    for meta_graph in saved_model.meta_graphs:
        for key, method in method_names.items():
            if key not in meta_graph.signature_def:
                raise KeyError(f"signature {key!r} not in {path}; has "
                               f"{sorted(meta_graph.signature_def)}")
            meta_graph.signature_def[key].method_name = method
    path.write_bytes(saved_model.SerializeToString(deterministic=True))
    fingerprint = pathlib.Path(export_dir) / "fingerprint.pb"
    try:  # private TF API; the fingerprint is optional, a stale one is not
        from tensorflow.python.saved_model import fingerprinting_utils
        fingerprint.unlink(missing_ok=True)
        fingerprinting_utils.write_fingerprint(str(export_dir))
    except Exception as e:  # noqa: BLE001
        logger.warning("could not rewrite %s (%s); removed it", fingerprint, e)
        fingerprint.unlink(missing_ok=True)


# ---- warmup records ---------------------------------------------------------------------------

def _text_example(text: str, text_b: str | None) -> tf.train.Example:
    feature = {sigs.TEXT_FEATURE: tf.train.Feature(
        bytes_list=tf.train.BytesList(value=[text.encode("utf-8")]))}
    if text_b is not None:
        feature[sigs.TEXT_B_FEATURE] = tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[text_b.encode("utf-8")]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def warmup_logs(module: sigs.ClassifierServingModule, model_name: str, texts) -> list:
    """`PredictionLog`s exercising every signature: Predict on serving_default (batch 1 and the
    full batch) and on encoded (int32 ids from the module's own preprocessor), then Classify or
    Regress on serialized tf.Examples.

    Args:
        texts: list of (text, text_b) pairs; text_b is used only for pair tasks.
    """
    from tensorflow_serving.apis import (classification_pb2, inference_pb2, input_pb2,
                                         predict_pb2, prediction_log_pb2, regression_pb2)

    a = [t for t, _ in texts]
    b = [t_b for _, t_b in texts] if module.is_pair else None
    logs = []
    for n in (1, len(a)):
        req = predict_pb2.PredictRequest()
        req.model_spec.name = model_name
        req.model_spec.signature_name = "serving_default"
        req.inputs[sigs.TEXT_FEATURE].CopyFrom(tf.make_tensor_proto(np.array(a[:n], dtype=object)))
        if b is not None:
            req.inputs[sigs.TEXT_B_FEATURE].CopyFrom(
                tf.make_tensor_proto(np.array(b[:n], dtype=object)))
        logs.append(prediction_log_pb2.PredictionLog(
            predict_log=prediction_log_pb2.PredictLog(request=req)))

    packed = module.preprocessor({"text": tf.constant(a), "text_b": tf.constant(b)} if b is not None
                                 else tf.constant(a))
    req = predict_pb2.PredictRequest()
    req.model_spec.name = model_name
    req.model_spec.signature_name = "encoded"
    for name in sigs.INPUT_NAMES:
        req.inputs[name].CopyFrom(tf.make_tensor_proto(tf.cast(packed[name], tf.int32).numpy()))
    logs.append(prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=req)))

    examples = input_pb2.Input(example_list=input_pb2.ExampleList(
        examples=[_text_example(t, t_b if module.is_pair else None) for t, t_b in texts]))
    if module.task_type == "classification":
        req = classification_pb2.ClassificationRequest(input=examples)
        req.model_spec.name, req.model_spec.signature_name = model_name, "classification"
        logs.append(prediction_log_pb2.PredictionLog(
            classify_log=prediction_log_pb2.ClassifyLog(request=req)))
    else:
        req = regression_pb2.RegressionRequest(input=examples)
        req.model_spec.name, req.model_spec.signature_name = model_name, "regression"
        logs.append(prediction_log_pb2.PredictionLog(
            regress_log=prediction_log_pb2.RegressLog(request=req)))
    del inference_pb2  # imported only so the Input proto's dependencies are registered
    return logs


def write_warmup_requests(export_dir, logs) -> pathlib.Path:
    """Writes `export_dir/assets.extra/tf_serving_warmup_requests` (TFRecord of PredictionLog)."""
    path = pathlib.Path(export_dir) / "assets.extra" / WARMUP_FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for log in logs:
            writer.write(log.SerializeToString())
    return path


# ---- fine-tuning runs (the CLI's --model_dir) ----------------------------------------------

def resolve_model_dir(model_dir: str) -> tuple[pathlib.Path, dict]:
    """(path of the .keras model, merged config.json + labels.json of its run, {} if absent).

    Raises:
        FileNotFoundError: no such path, or a directory without best_model.keras / a single .keras.
    """
    path = pathlib.Path(model_dir)
    if path.is_dir():
        candidates = [path / "best_model.keras"] if (path / "best_model.keras").is_file() \
            else sorted(path.glob("*.keras"))
        if len(candidates) != 1:
            raise FileNotFoundError(f"{path} holds {len(candidates)} .keras files (want "
                                    "best_model.keras or exactly one); pass the file itself")
        keras_file, run_dir = candidates[0], path
    elif path.is_file() and path.suffix == ".keras":
        keras_file, run_dir = path, path.parent
    else:
        raise FileNotFoundError(f"--model_dir={model_dir}: not a directory or .keras file")
    meta = {}
    for name in ("config.json", "labels.json"):
        if (run_dir / name).is_file():
            meta.update(json.loads((run_dir / name).read_text()))
    return keras_file, meta



# ---- the export -------------------------------------------------------------------------------

def infer_is_pair(task_name: str | None) -> bool:
    """True for pair tasks: GLUE pair tasks (mrpc, stsb, qqp, mnli, qnli, rte, wnli) and own-data
    "text_pair_*" tasks; False for anything else (with a warning when the name is unknown)."""
    if not task_name:
        logger.warning("model has no task_name; exporting a single-text model (pass is_pair=True "
                       "for sentence-pair tasks)")
        return False
    name = str(task_name).lower()
    if name.startswith("text_pair"):
        return True
    from keras_bert.data import glue
    try:
        return glue.get_task(name).is_pair
    except ValueError:
        logger.warning("unknown task_name %r; exporting a single-text model", task_name)
        return False


def resolve_label_names(model, label_names, task_type) -> list[str]:
    """The label names to export: `label_names` (display names, which override the model's),
    else `model.label_names`; [] for regression.

    Raises:
        ValueError: a classifier whose count of names differs from `model.num_classes` (a label
            that could never be returned, or a class without a name), or from the count of
            `model.label_names` stored with the model.
    """
    if task_type == "regression":
        return []
    stored = getattr(model, "label_names", None)
    if label_names is None:
        label_names = stored
    label_names = [str(x) for x in (label_names or [])]
    num_classes = getattr(model, "num_classes", None)
    if num_classes is not None and label_names and len(label_names) != int(num_classes):
        raise ValueError(f"got {len(label_names)} label names {label_names} but the model has "
                         f"num_classes={int(num_classes)}; give exactly one name per class, in id "
                         "order (--label_names)")
    if stored and len(stored) != len(label_names):
        raise ValueError(f"got {len(label_names)} label names {label_names} but the model stores "
                         f"{len(stored)} label_names {list(stored)}; give the same count (same-count "
                         "names override the stored ones as display names)")
    return label_names


def make_preprocessor(vocab_file, do_lower_case: bool, max_seq_length: int, tokenizer: str = "core"):
    """The in-graph `BertPreprocessor` for the export ("core": core TF ops only, loads with plain
    TensorFlow; "tf_text": tensorflow-text ops, the loader must `import tensorflow_text`).

    Raises:
        ValueError: unknown tokenizer.
    """
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {tokenizer!r}")
    from keras_bert.tokenization import BertPreprocessor
    return BertPreprocessor(vocab_file=str(vocab_file), do_lower_case=do_lower_case,
                            max_seq_length=max_seq_length, tokenizer=tokenizer)


EXPORT_DTYPES = ("float32", "bfloat16")


def with_dtype(model, dtype: str):
    """The same model under Keras dtype policy `dtype`, with the same weights (cast).

    Returns `model` itself when its policy already is `dtype`. Otherwise the model is
    rebuilt from its config (the nested encoder's policy replaced too) and its weights copied, so
    a model trained under `mixed_bfloat16` (float32 variables) exports with bfloat16 variables.

    Raises:
        ValueError: dtype not in EXPORT_DTYPES.
    """
    if dtype not in EXPORT_DTYPES:
        raise ValueError(f"dtype must be one of {list(EXPORT_DTYPES)}, got {dtype!r}")
    if dtype == getattr(model.dtype_policy, "name", None):
        return model
    config = model.get_config()
    config["dtype"] = dtype
    if isinstance(config.get("encoder"), dict) and "config" in config["encoder"]:
        config["encoder"]["config"]["dtype"] = dtype
    rebuilt = model.__class__.from_config(config)
    encoder = sigs.find_encoder(model)
    length = min(8, encoder.bert_config.max_sequence_length)
    rebuilt({name: tf.ones((1, length), tf.int32) for name in sigs.INPUT_NAMES})
    rebuilt.set_weights(model.get_weights())
    return rebuilt


def export_classifier(model, export_base, model_name, label_names, vocab_file, do_lower_case,
                      max_seq_length, task_type=None, is_pair=None, version=None,
                      tokenizer="core", *, preprocessor=None, warmup_texts=None,
                      extra_config=None, dtype=None) -> pathlib.Path:
    """Exports a fine-tuned sentence (pair) classifier/regressor as `EXPORT_BASE/<name>/<version>`.

    Args:
        model: Keras model, dict of int32 [B, T] inputs -> logits [B, C] or scores [B, 1]
            (`BertClassifier`).
        export_base: directory holding one sub-directory per model name (created if missing).
        model_name: str, the name servers serve it under; a plain file name.
        label_names: list of C label strings in id order (classification), C = the model's
            num_classes (and the count of `model.label_names` when it stores them; same-count
            names override them as display names); None/[] for regression. Defaults to
            `model.label_names` when None.
        vocab_file: WordPiece vocab the model was fine-tuned with (copied to assets/vocab.txt).
        do_lower_case: bool, as in fine-tuning.
        max_seq_length: int, tokens per packed text (incl. [CLS]/[SEP]) in serving_default.
        task_type: "classification" or "regression"; None: from the model (`num_classes == 1`
            is regression, `BertClassifier.is_regression`).
        is_pair: bool; adds `text_b` to serving_default and the tf.Example signatures. None:
            from the model's `task_name` (a GLUE task's layout, or "text_pair_*"), else False.
        version: positive int, or None for the next free integer.
        tokenizer: "core" (default) or "tf_text" (see `make_preprocessor`).
        preprocessor: optional prebuilt preprocessor layer (overrides the four tokenizer args).
        warmup_texts: optional list of (text, text_b) for the warmup records.
        extra_config: optional JSON-able dict merged into assets/export_config.json.
        dtype: None (default: the model as it is), "float32" or "bfloat16": the model is rebuilt
            with that Keras dtype policy and its weights copied (`with_dtype`); bfloat16 stores the encoder's
            variables in bfloat16 (half the size, no per-call casts on CPUs with AVX512_BF16 or
            AMX; LayerNorm, softmax and the logits stay float32). Outputs are float32 either way.

    Returns:
        pathlib.Path of the published version directory.

    Raises:
        ValueError: bad model_name / version / task_type / labels (a label count other than
            num_classes, see `resolve_label_names`); FileExistsError: the version
            exists; any save error, after removing the temporary directory.
    """
    if not model_name or os.sep in str(model_name) or str(model_name).startswith("."):
        raise ValueError(f"model_name must be a plain directory name, got {model_name!r}")
    if version is not None and (int(version) != version or int(version) < 1):
        raise ValueError(f"version must be a positive integer, got {version!r}")
    if task_type is None:
        task_type = "regression" if getattr(model, "num_classes", 2) == 1 else "classification"
    if dtype is not None:
        model = with_dtype(model, dtype)
    if is_pair is None:
        is_pair = infer_is_pair(getattr(model, "task_name", None))
    label_names = resolve_label_names(model, label_names, task_type)
    if preprocessor is None:
        preprocessor = make_preprocessor(vocab_file, do_lower_case, max_seq_length, tokenizer)
    model_dir = pathlib.Path(export_base) / model_name
    model_dir.mkdir(parents=True, exist_ok=True)
    chosen = int(version) if version is not None else next_version(model_dir)
    if (model_dir / str(chosen)).exists():
        raise FileExistsError(f"version {chosen} already exists at {model_dir / str(chosen)}; "
                              "exported versions are never overwritten")

    staging = pathlib.Path(tempfile.mkdtemp(prefix="keras_bert_assets_"))
    tmp_dir = pathlib.Path(tempfile.mkdtemp(prefix=f".tmp-{chosen}-", dir=model_dir))
    # mkdtemp makes 0700 directories; the published version must be readable as the umask allows
    # (a server running as another user reads it).
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_dir, 0o777 & ~umask)
    try:
        encoder_cfg = sigs.find_encoder(model).bert_config
        config = {
            "model_name": model_name, "task_type": task_type, "is_pair": bool(is_pair),
            "label_names": label_names, "max_seq_length": int(max_seq_length),
            "do_lower_case": bool(do_lower_case), "tokenizer": tokenizer,
            "requires_tensorflow_text": tokenizer == "tf_text",
            "input_id_dtype": "int32", "dtype_policy": model.dtype_policy.name, "bert_config": dataclasses.asdict(encoder_cfg),
            "signatures": {"serving_default": "text" + (", text_b" if is_pair else ""),
                           "encoded": ", ".join(sigs.INPUT_NAMES),
                           task_type: "inputs (serialized tf.Example)"},
            **(extra_config or {}),
        }
        shutil.copyfile(vocab_file, staging / "vocab.txt")
        (staging / CONFIG_FILENAME).write_text(json.dumps(config, indent=2, sort_keys=True))
        assets = {"vocab_file": tf.saved_model.Asset(str(staging / "vocab.txt")),
                  "config_file": tf.saved_model.Asset(str(staging / CONFIG_FILENAME))}
        if label_names:
            (staging / "labels.txt").write_text("".join(f"{x}\n" for x in label_names))
            assets["labels_file"] = tf.saved_model.Asset(str(staging / "labels.txt"))
        module = sigs.ClassifierServingModule(model, preprocessor, label_names, task_type,
                                              is_pair, assets)
        tf.saved_model.save(module, str(tmp_dir), signatures=module.signatures())
        set_method_names(tmp_dir, sigs.method_names(task_type))
        write_warmup_requests(tmp_dir, warmup_logs(module, model_name,
                                                   list(warmup_texts or DEFAULT_WARMUP_TEXTS)))
        while True:
            try:
                target = publish(tmp_dir, model_dir, chosen)
                break
            except FileExistsError:
                if version is not None:
                    raise
                chosen = next_version(model_dir)  # another writer took it: take the next one
        logger.info("exported %s version %d to %s", model_name, chosen, target)
        return target
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
