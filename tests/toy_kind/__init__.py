"""A toy task kind, "toy_scoring" (one score in [0, 1] per text), written the way a new kind is
added to keras-bert: one file per layer and nothing else of the project edited.

- `reader.py`        its data (JSON Lines rows {"text": str, "score": float});
- `task.py`          the `Task` (tasks/ layer): pooled [CLS] vector -> one sigmoid score;
- `signatures.py`    its exported signatures (saved_model/ layer);
- `family.py`        its training family (training/families/ layer);
- `evidence.py`      its evidence-pack kind (evaluation/kinds/ layer), registered on import;
- `recipe.py`        its fine-tuning recipe (`python -m tests.toy_kind.recipe --help`).

`tests/toy_kind/test_toy_kind.py` runs it through training, export and the evidence pack.
"""
