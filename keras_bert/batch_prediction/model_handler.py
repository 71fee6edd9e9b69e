"""An exported SavedModel's text-in `serving_default` as a Beam `ModelHandler` for `RunInference`.

`ExportSignature.read` learns what the model takes and gives from `saved_model.pb` (and
assets/export_config.json when the export is ours) without loading it, so the driver checks the
columns before any worker starts. `TextSignatureHandler` loads the version directory with
`tf.saved_model.load` once per worker process (Beam's `Shared`), feeds `text` (and `text_b`) of a
batch of `rows.InputRow`s, and yields one `PredictionResult` per row whose `inference` is a dict
output name -> numpy value of that row, or a `PredictionFailure`.

A batch whose call fails is retried row by row, so only the row that fails alone is dead-lettered;
the others are predicted as if nothing happened.

Length buckets: with `bucket_boundaries` (characters of text + text_b, lower-inclusive), Beam
2.77's `BatchElements` keys rows by (worker, length bucket) before its stateful batching
(`batch_length_fn` / `batch_bucket_boundaries` of `ModelHandler`), so a batch holds texts of
similar length; `serving_default` pads a batch to its longest row, so short texts stop paying for
long ones.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Sequence

import tensorflow as tf
from apache_beam.ml.inference.base import ModelHandler, PredictionResult
from tensorflow.core.protobuf import saved_model_pb2

from keras_bert import fileio
from keras_bert.batch_prediction.records import SIGNATURE
from keras_bert.batch_prediction.rows import InputRow
from keras_bert.saved_model import versioning

TEXT_INPUTS = ("text", "text_b")
EXPORT_CONFIG = ("assets", "export_config.json")
# How long the stateful (bucketed) batching waits to fill a batch of one bucket before it sends
# a smaller one. In a batch pipeline the end of the input flushes every bucket anyway.
MAX_BATCH_DURATION_SECS = 10


def resolve_model_dir(model: str) -> str:
    """`model` itself when it is a version directory (holds saved_model.pb), else the newest
    complete version under it (`versioning.newest_complete_version`).

    Raises:
        FileNotFoundError: neither, naming `model`.
    """
    if fileio.isfile(fileio.join(model, "saved_model.pb")):
        return model
    if not fileio.isdir(model):
        raise FileNotFoundError(f"--model {model}: no such directory")
    version = versioning.newest_complete_version(model)
    if version is None:
        raise FileNotFoundError(
            f"--model {model}: neither a SavedModel version directory (no saved_model.pb) nor a "
            "model base directory with a complete integer version"
        )
    return fileio.join(model, str(version))


@dataclasses.dataclass(frozen=True)
class ExportSignature:
    """What `serving_default` of one version directory takes and returns.

    Attributes:
        version_dir: str, the SavedModel.
        model_name: str (export_config's, else the base directory's name).
        version: int (the directory's name; 0 when it is not an integer).
        inputs: tuple of input names, sorted ("text", or "text", "text_b").
        outputs: tuple of output names, sorted.
        requires_tensorflow_text: bool, the graph needs tensorflow_text's ops registered.
    """

    version_dir: str
    model_name: str
    version: int
    inputs: tuple
    outputs: tuple
    requires_tensorflow_text: bool

    @property
    def is_pair(self) -> bool:
        return "text_b" in self.inputs

    @classmethod
    def read(cls, version_dir: str) -> "ExportSignature":
        """Reads saved_model.pb (and export_config.json when present).

        Raises:
            ValueError: no `serving_default`, or one that does not take text (and text_b).
        """
        saved_model = saved_model_pb2.SavedModel.FromString(
            fileio.read_bytes(fileio.join(version_dir, "saved_model.pb"))
        )
        signatures = saved_model.meta_graphs[0].signature_def
        if SIGNATURE not in signatures:
            raise ValueError(f"{version_dir}: no {SIGNATURE} signature; has {sorted(signatures)}")
        inputs = tuple(sorted(signatures[SIGNATURE].inputs))
        if inputs not in (("text",), ("text", "text_b")):
            raise ValueError(
                f"{version_dir}: {SIGNATURE} takes {list(inputs)}; batch prediction feeds "
                "'text' (and 'text_b' for pair tasks)"
            )
        config_path = fileio.join(version_dir, *EXPORT_CONFIG)
        config = fileio.read_json(config_path) if fileio.exists(config_path) else {}
        name = fileio.basename(version_dir)
        return cls(
            version_dir=version_dir,
            model_name=config.get("model_name") or fileio.basename(fileio.parent(version_dir)),
            version=int(name) if name.isdigit() else 0,
            inputs=inputs,
            outputs=tuple(sorted(signatures[SIGNATURE].outputs)),
            requires_tensorflow_text=bool(config.get("requires_tensorflow_text")),
        )


@dataclasses.dataclass(frozen=True)
class PredictionFailure:
    """The `inference` of a row whose prediction failed even alone: `reason` (one line)."""

    reason: str


def row_length(row: InputRow) -> int:
    """The bucketing length of a row (characters; a module function so Beam can pickle it)."""
    return row.length


class _Loaded:
    """The loaded SavedModel (kept alive: a signature does not hold its variables) and its
    `serving_default` concrete function."""

    def __init__(self, version_dir: str):
        self.saved_model = tf.saved_model.load(version_dir)
        self.signature = self.saved_model.signatures[SIGNATURE]


class TextSignatureHandler(ModelHandler):
    """`RunInference` over `InputRow`s with an export's `serving_default`.

    Args:
        export: the `ExportSignature` of the version directory.
        eval_batch_size: int >= 1, rows per call (every batch but the last of a bucket).
        bucket_boundaries: sorted positive ints (characters), or None for one batch stream.
    """

    def __init__(self, export: ExportSignature, eval_batch_size: int, bucket_boundaries=None):
        kwargs: dict[str, Any] = {
            "min_batch_size": eval_batch_size,
            "max_batch_size": eval_batch_size,
        }
        if bucket_boundaries:
            kwargs.update(
                batch_length_fn=row_length,
                batch_bucket_boundaries=list(bucket_boundaries),
                max_batch_duration_secs=MAX_BATCH_DURATION_SECS,
            )
        super().__init__(**kwargs)
        self.export = export

    def load_model(self) -> _Loaded:
        if self.export.requires_tensorflow_text:
            import tensorflow_text  # noqa: F401  (optional: registers the graph's custom ops)
        return _Loaded(self.export.version_dir)

    def call(self, model: _Loaded, rows: Sequence[InputRow]) -> dict:
        """The signature on `rows`: output name -> numpy [len(rows), ...].

        Raises:
            ValueError: an output whose first dimension is not the batch.
        """
        inputs = {"text": tf.constant([r.text for r in rows], tf.string)}
        if self.export.is_pair:
            inputs["text_b"] = tf.constant([r.text_b for r in rows], tf.string)
        outputs = {k: v.numpy() for k, v in model.signature(**inputs).items()}
        for name, value in outputs.items():
            if value.shape[:1] != (len(rows),):
                raise ValueError(f"output {name} has shape {value.shape} for {len(rows)} rows")
        return outputs

    def run_inference(
        self, batch: Sequence[InputRow], model: _Loaded, inference_args=None
    ) -> Iterable[PredictionResult]:
        try:
            outputs = self.call(model, batch)
        except Exception as e:  # any failure of the model on this batch: retry row by row
            if len(batch) > 1:
                return [r for row in batch for r in self.run_inference([row], model)]
            cause = " ".join(str(e).split())[:300]
            return [PredictionResult(batch[0], PredictionFailure(f"prediction failed: {cause}"))]
        return [
            PredictionResult(row, {name: value[i] for name, value in outputs.items()})
            for i, row in enumerate(batch)
        ]

    def get_num_bytes(self, batch: Sequence[InputRow]) -> int:
        return sum(len(r.text.encode()) + len((r.text_b or "").encode()) for r in batch)

    def get_metrics_namespace(self) -> str:
        return "keras_bert_batch_predict"
