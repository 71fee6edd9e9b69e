"""Building blocks of the recipe runs on `ram://` (TensorFlow's in-memory file system, the stand-in
for gs:// / s3://), shared by test_uri_paths.py and test_uri_paths_families.py.

ram:// lives in one process, so the fine-tuning families run in process: `run_family` does what
`recipe.run_recipe` does (`trainer.prepare`, then `trainer.run`). The `ram` fixture (conftest.py) gives
each test a fresh root holding a small vocab.txt (`RESERVED` + `WORDS`), from `ram_root`.
"""

import os
import uuid

from keras_bert import fileio
from keras_bert.checkpoints import save_encoder
from keras_bert.config import BertConfig
from keras_bert.models.bert_encoder import BertEncoder
from keras_bert.training import trainer

RESERVED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = "a good fine great film movie bad dull awful plot the was is not very it".split()


def ram_root(local_dir):
    """Yields a fresh ram:// root holding vocab.txt (`RESERVED` + `WORDS`), then deletes it and
    asserts `local_dir` (the cwd meanwhile) is still empty: no local `ram:` directory, which
    pathlib's folding of `ram://x` would make."""
    root = f"ram://uri-test-{uuid.uuid4().hex[:8]}"
    fileio.makedirs(root)
    fileio.write_text(f"{root}/vocab.txt", "".join(t + "\n" for t in RESERVED + WORDS))
    yield root
    fileio.rmtree(root)
    assert os.listdir(local_dir) == []


def write(path: str, data) -> None:
    """Writes a file (text or bytes) in a directory made first (TensorFlow's ram:// writes into a
    directory never made, which its rmtree then cannot delete; a local disk would refuse)."""
    fileio.makedirs(fileio.parent(path))
    (fileio.write_text if isinstance(data, str) else fileio.write_bytes)(path, data)


def tiny_checkpoint(root: str, vocab: str) -> str:
    """A random bert_tiny (2 layers, H=128) sized to the `vocab` file, saved with that vocab as
    a keras-bert checkpoint at `<root>/init`; returns its path."""
    size = len(fileio.read_text(vocab).splitlines())
    encoder = BertEncoder.from_config_object(BertConfig.from_preset("bert_tiny", vocab_size=size))
    encoder.build()
    return save_encoder(encoder, f"{root}/init", vocab, True)


def run_family(family, args) -> dict:
    """Runs the fine-tuning family of module `family` (e.g. `families.ner`) with `args` in this
    process, as `recipe.run_recipe` does; returns the run's summary."""
    return trainer.run(family.FAMILY, args, trainer.prepare(family.FAMILY, args))


def quiet_epoch(output_dir: str) -> dict:
    """The settings of a run that trains one epoch into `output_dir` without progress output."""
    return dict(num_train_epochs=1, verbose=0, output_dir=output_dir)


def exported_epoch(ram: str, name: str) -> dict:
    """`quiet_epoch` into <ram>/<name>, the model then exported as <ram>/models/<name>."""
    return dict(quiet_epoch(f"{ram}/{name}"), export_dir=f"{ram}/models", model_name=name)


def run_and_assert_kept(family, args, *recorded: str) -> tuple[dict, dict]:
    """`run_family(family, args)`; then asserts `args.output_dir` kept the best model
    (best_model.keras) and its config.json records output_dir and each setting named in
    `recorded` as `args` holds it (as given, URIs unchanged). Returns (the run's summary, its
    metrics.json)."""
    summary = run_family(family, args)
    out = args.output_dir
    config = fileio.read_json(f"{out}/config.json")
    for name in ("output_dir", *recorded):
        assert config[name] == getattr(args, name), name
    assert fileio.isfile(f"{out}/best_model.keras")
    return summary, fileio.read_json(f"{out}/metrics.json")
