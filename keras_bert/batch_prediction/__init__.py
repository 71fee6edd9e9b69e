"""Batch prediction on Apache Beam (SPEC section 12): an exported model's `serving_default` over
CSV / TSV / JSONL / TFRecord files, with dead-lettered rows and a completion record.

- `rows`: the input files as rows (`InputRow`) or the reason a row cannot be read (`RowError`).
- `model_handler`: the export's signature as a Beam `ModelHandler` (`RunInference`), a failed
  batch retried row by row; per-row JSON and `PredictionLog` records.
- `pipeline`: the Beam pipeline, its sharded outputs and `batch_predict.json`.

recipes/batch_predict.py is the command line; docs/batch_prediction.md the user's guide.
"""
