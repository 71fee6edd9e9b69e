"""An export prints nothing TensorFlow says about its own bookkeeping, and everything else."""

import logging
import pathlib

import pytest

from keras_bert.saved_model.harmless_logs import HarmlessExportMessages, quiet_harmless_export_logs

RENAMED = (
    "Function `serving_default` contains input name(s) params, 916, table_handle, resource "
    "with unsupported characters which will be renamed to bert_preprocessor_1_gatherv2_3_params, "
    "bert_preprocessor_1_shape_916 in the SavedModel."
)
TABLE = (
    "Issue encountered when serializing table_initializer.\nType is unsupported, or the types of "
    "the items don't match field type in CollectionDef. Note this is a warning and probably safe "
    "to ignore.\n'NoneType' object has no attribute 'name'"
)


TF_FILE = "/venv/lib/python3.11/site-packages/tensorflow/python/saved_model/builder_impl.py"


def _record(message, name="tensorflow", level=logging.WARNING, path=__file__):
    return logging.LogRecord(name, level, path, 1, message, None, None)


def test_filter_drops_the_known_messages_and_tensorflow_info_only():
    keep = HarmlessExportMessages().filter
    assert not keep(_record(RENAMED, "absl", logging.INFO))
    assert not keep(_record(TABLE))
    assert not keep(
        _record("Assets written to: models/m/.tmp-1/assets", "absl", logging.INFO, TF_FILE)
    )
    assert keep(_record("Issue encountered when serializing variables."))  # another collection
    assert keep(
        _record("Found untraced functions such as _update_step_xla", path=TF_FILE)
    )  # a warning
    assert keep(_record("exported m version 1 to /models/m/1", "keras_bert", logging.INFO))


def test_filter_is_removed_after_the_block(caplog):
    logger = logging.getLogger("tensorflow")
    with caplog.at_level(logging.INFO, logger="tensorflow"):
        with quiet_harmless_export_logs():
            logger.warning(TABLE)
            logger.warning("kept inside")
        logger.warning(TABLE)
    assert [r.getMessage() for r in caplog.records] == ["kept inside", TABLE]


@pytest.mark.slow  # one SavedModel and one LiteRT conversion of a tiny task: ~15 s
def test_export_with_litert_logs_neither_message(tmp_path, caplog, uncased_vocab):
    from absl import logging as absl_logging

    from tests.export.conftest import tiny_classifier

    task = tiny_classifier(2, ["a", "b"], None, None, uncased_vocab, num_layers=1, for_export=True)
    verbosity = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.INFO)  # as the recipes and `python -m export` run
    try:
        with caplog.at_level(logging.INFO):
            path = pathlib.Path(task.export(tmp_path, "m", litert="float32"))
    finally:
        absl_logging.set_verbosity(verbosity)
    messages = [r.getMessage() for r in caplog.records]
    assert (path / "model.tflite").is_file()
    assert not [
        m
        for m in messages
        if "unsupported characters" in m
        or "table_initializer" in m
        or m.startswith(("Assets written to", "Writing fingerprint", "Sharding callback"))
    ]
    assert any(m.startswith("exported m version 1 to") for m in messages)  # the rest still passes
