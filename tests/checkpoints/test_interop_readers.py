"""Reading Model Garden TF2 checkpoints, TF Hub-style SavedModels and keras-hub presets.

Each artifact is made by its own library from known weights: a google-research TF1 checkpoint
(test helpers) converted by tf-models-official's `tf2_bert_encoder_checkpoint_converter`, then
exported by its `export_tfhub_lib.export_model`; a keras-hub `BertBackbone` saved with
`save_to_preset`. Our encoder loaded from each must match that library's own forward pass.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.checkpoints import (
    CheckpointError,
    detect_format,
    load_encoder,
    read_checkpoint,
    resolve_do_lower_case,
    resolve_vocab_file,
)
from keras_bert.checkpoints.model_garden import read_model_garden_checkpoint
from tests.checkpoints.helpers import (
    CFG,
    FEATURES,
    VOCAB_TEXT,
    encoder_outputs,
    max_diff,
    hf_to_google,
    keras_hub_outputs,
    random_hf_weights,
    random_keras_hub_backbone,
    write_google_dir,
)


@pytest.fixture(scope="module")
def google_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("uncased_google")
    write_google_dir(str(directory), CFG, hf_to_google(random_hf_weights(CFG, seed=3)))
    (directory / "vocab.txt").write_text(VOCAB_TEXT)
    return directory


@pytest.fixture(scope="module")
def model_garden_dir(tmp_path_factory, google_dir):
    """tf-models-official's own converter, TF1 google-research checkpoint -> TF2 encoder."""
    from official.legacy.bert import configs
    from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as converter

    directory = tmp_path_factory.mktemp("uncased_model_garden")
    bert_config = configs.BertConfig.from_json_file(str(google_dir / "bert_config.json"))
    converter.convert_checkpoint(
        bert_config,
        str(directory / "bert_model.ckpt"),
        str(google_dir / "bert_model.ckpt"),
        checkpoint_model_name="encoder",
        converted_model="encoder",
    )
    for name in ("bert_config.json", "vocab.txt"):
        (directory / name).write_bytes((google_dir / name).read_bytes())
    return directory


def _model_garden_encoder(config_dir, hidden_act=None):
    """Model Garden's own encoder (export_tfhub_lib.get_bert_encoder) for the bert_config.json in
    `config_dir`, with its config; `hidden_act` (a name, or a callable used as is) replaces the
    config's activation."""
    from official.legacy.bert import configs
    from official.nlp.tools import export_tfhub_lib

    bert_config = configs.BertConfig.from_json_file(str(config_dir / "bert_config.json"))
    if hidden_act is not None:
        bert_config.hidden_act = hidden_act
    return bert_config, export_tfhub_lib.get_bert_encoder(bert_config)


def test_model_garden_checkpoint_matches_model_garden_encoder(model_garden_dir, google_dir):
    assert detect_format(model_garden_dir)[0] == "model_garden"
    assert detect_format(google_dir)[0] == "google"
    _, mg_encoder = _model_garden_encoder(google_dir)
    prefix = tf.train.latest_checkpoint(str(model_garden_dir))
    tf.train.Checkpoint(encoder=mg_encoder).restore(prefix).assert_existing_objects_matched()
    out = mg_encoder(FEATURES, training=False)
    reference = (out["sequence_output"].numpy(), out["pooled_output"].numpy())

    encoder = load_encoder(model_garden_dir)
    assert encoder.bert_config.hidden_activation == "gelu_approximate"
    assert max_diff(encoder_outputs(encoder), reference) <= 1e-5
    # Same weights as reading the TF1 original directly.
    assert max_diff(encoder_outputs(encoder), encoder_outputs(load_encoder(google_dir))) <= 1e-6
    source = read_checkpoint(model_garden_dir)
    names = {n for n, _ in tf.train.list_variables(prefix)}
    assert set(source.used()) | set(source.ignored) == names
    assert not set(source.used()) & set(source.ignored)
    assert len(source.used()) == 5 + 2 * 16 + 2
    assert source.ignored.keys() == {
        "_CHECKPOINTABLE_OBJECT_GRAPH",
        "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
    }
    assert resolve_do_lower_case(model_garden_dir) is True  # "uncased" in the directory name


def test_model_garden_config_inferred_from_shapes(tmp_path, model_garden_dir):
    """Without bert_config.json: sizes from shapes, Model Garden's tanh GELU."""
    for name in os.listdir(model_garden_dir):
        if name != "bert_config.json":
            (tmp_path / name).write_bytes((model_garden_dir / name).read_bytes())
    config = load_encoder(tmp_path).bert_config
    assert (
        config.vocab_size,
        config.hidden_size,
        config.num_layers,
        config.num_heads,
        config.intermediate_size,
        config.max_sequence_length,
        config.type_vocab_size,
        config.hidden_activation,
    ) == (23, 8, 2, 2, 12, 7, 3, "gelu_approximate")


def test_model_garden_unexpected_variable_is_listed(tmp_path, google_dir):
    _, mg_encoder = _model_garden_encoder(google_dir)
    extra = tf.Variable(np.zeros([3], np.float32))
    tf.train.Checkpoint(encoder=mg_encoder, head=extra).save(str(tmp_path / "ckpt"))
    with pytest.raises(CheckpointError, match=r"unexpected variables .*head/\.ATTRIBUTES"):
        load_encoder(tmp_path)


@pytest.mark.slow  # builds a BertPretrainerV2 and an optimizer: ~6 s on 2 shared cores
def test_model_garden_training_checkpoint(tmp_path, model_garden_dir, google_dir):
    """As Model Garden training saves it: pretrainer + optimizer + step; tied embeddings."""
    import tf_keras
    from official.nlp.modeling import models

    _, mg_encoder = _model_garden_encoder(google_dir)
    prefix = tf.train.latest_checkpoint(str(model_garden_dir))
    tf.train.Checkpoint(encoder=mg_encoder).restore(prefix).assert_existing_objects_matched()
    pretrainer = models.BertPretrainerV2(encoder_network=mg_encoder)
    pretrainer(pretrainer.inputs)
    optimizer = tf_keras.optimizers.Adam()
    optimizer.build(pretrainer.trainable_variables)
    tf.train.Checkpoint(
        model=pretrainer, optimizer=optimizer, global_step=tf.Variable(7, dtype=tf.int64)
    ).save(str(tmp_path / "ckpt"))
    out = mg_encoder(FEATURES, training=False)
    reference = (out["sequence_output"].numpy(), out["pooled_output"].numpy())

    assert detect_format(tmp_path)[0] == "model_garden"
    assert max_diff(encoder_outputs(load_encoder(tmp_path)), reference) <= 1e-5
    source = read_checkpoint(tmp_path)
    keys = {n for n, _ in tf.train.list_variables(tf.train.latest_checkpoint(str(tmp_path)))}
    assert set(source.used()) | set(source.ignored) == keys
    assert len(source.used()) == 5 + 2 * 16 + 2
    # Stored once, under the masked-LM head's path: found through the object graph.
    assert source.source_names["embeddings/word_embeddings"] == (
        "model/masked_lm/embedding_table/.ATTRIBUTES/VARIABLE_VALUE"
    )
    reasons = set(source.ignored.values())
    assert any("BertPretrainerV2 head" in r for r in reasons)
    assert any("optimizer state" in r for r in reasons)
    assert source.ignored["global_step/.ATTRIBUTES/VARIABLE_VALUE"] == "training step counter"


def test_tf1_checkpoint_is_not_taken_for_model_garden(google_dir):
    with pytest.raises(
        CheckpointError,
        match="expected one Model Garden BertEncoder in an object-based checkpoint, found 0",
    ):
        read_model_garden_checkpoint(str(google_dir))


@pytest.mark.slow  # export_tfhub builds and saves a SavedModel: ~10 s on 2 shared cores
def test_tfhub_saved_model_matches_the_saved_model(tmp_path, model_garden_dir, google_dir):
    from official.nlp.tools import export_tfhub_lib

    bert_config, _ = _model_garden_encoder(google_dir)
    export_dir = str(tmp_path / "hub")
    export_tfhub_lib.export_model(
        export_dir,
        bert_config=bert_config,
        model_checkpoint_path=tf.train.latest_checkpoint(str(model_garden_dir)),
        with_mlm=False,
        vocab_file=str(google_dir / "vocab.txt"),
        do_lower_case=True,
    )
    assert detect_format(export_dir)[0] == "tfhub_saved_model"
    hub = tf.saved_model.load(export_dir)
    out = hub({k: tf.constant(v) for k, v in FEATURES.items()}, training=False)
    reference = (out["sequence_output"].numpy(), out["pooled_output"].numpy())

    encoder = load_encoder(export_dir)
    assert encoder.bert_config.hidden_activation == "gelu_approximate"  # no Erf in the graph
    assert max_diff(encoder_outputs(encoder), reference) <= 1e-5
    source = read_checkpoint(export_dir)
    assert len(source.used()) + len(source.ignored) == len(hub.variables)
    assert set(source.used()) == {v.name[:-2] for v in hub.variables if v is not hub.do_lower_case}
    assert source.ignored.keys() == {"do_lower_case"}
    assert resolve_do_lower_case(export_dir) is True
    assert resolve_vocab_file(export_dir).endswith(os.path.join("assets", "vocab.txt"))


@pytest.mark.slow  # saves a SavedModel: ~10 s on 2 shared cores
def test_tfhub_saved_model_exact_gelu_is_read_from_the_graph(tmp_path, model_garden_dir):
    """A SavedModel of a Model Garden encoder with the exact GELU: the graph says so (Erfc)."""
    import tf_keras

    _, encoder = _model_garden_encoder(
        model_garden_dir, hidden_act=lambda x: tf.nn.gelu(x, approximate=False)
    )
    prefix = tf.train.latest_checkpoint(str(model_garden_dir))
    tf.train.Checkpoint(encoder=encoder).restore(prefix).assert_existing_objects_matched()
    inputs = (
        {x.name: x for x in encoder.inputs}
        if isinstance(encoder.inputs, list)
        else (encoder.inputs)
    )
    tf.saved_model.save(tf_keras.Model(inputs, encoder(inputs)), str(tmp_path))
    hub = tf.saved_model.load(str(tmp_path))
    out = hub({k: tf.constant(v) for k, v in FEATURES.items()}, training=False)
    ours = load_encoder(tmp_path)
    assert ours.bert_config.hidden_activation == "gelu"
    assert (
        max_diff(
            encoder_outputs(ours), (out["sequence_output"].numpy(), out["pooled_output"].numpy())
        )
        <= 1e-5
    )


@pytest.fixture(scope="module")
def keras_hub_backbone():
    return random_keras_hub_backbone(seed=5, gamma=1.0)


def test_keras_hub_preset_matches_keras_hub(tmp_path, keras_hub_backbone):
    keras_hub_backbone.save_to_preset(str(tmp_path))
    assert detect_format(tmp_path)[0] == "keras_hub"
    encoder = load_encoder(tmp_path)
    assert encoder.bert_config.hidden_activation == "gelu_approximate"
    assert max_diff(encoder_outputs(encoder), keras_hub_outputs(keras_hub_backbone)) <= 1e-5
    source = read_checkpoint(tmp_path)
    assert set(source.used()) == {v.path for v in keras_hub_backbone.weights}
    assert source.ignored == {}


def test_keras_hub_other_class_is_refused(tmp_path, keras_hub_backbone):
    keras_hub_backbone.save_to_preset(str(tmp_path))
    config = json.loads((tmp_path / "config.json").read_text())
    config["registered_name"] = "keras_hub>GPT2Backbone"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="keras_hub>GPT2Backbone, not keras_hub>BertBackbone"):
        load_encoder(tmp_path)
