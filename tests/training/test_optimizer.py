"""The BERT optimizer: schedule values, weight-decay exclusions, clipping, accumulation, options."""

import keras
import numpy as np
import pytest

from keras_bert.tasks import TextClassifier
from keras_bert.training import WarmupLinearDecay, create_optimizer, set_mixed_precision
from tests.tiny import tiny_encoder


def test_warmup_then_linear_decay_values():
    schedule = WarmupLinearDecay(1e-3, num_train_steps=10, num_warmup_steps=2)
    values = [float(schedule(s)) for s in (0, 1, 2, 6, 9, 10, 12)]
    np.testing.assert_allclose(values, [0, 5e-4, 1e-3, 5e-4, 1.25e-4, 0, 0], atol=1e-9)
    no_warmup = WarmupLinearDecay(2e-5, 4, 0)
    np.testing.assert_allclose(
        [float(no_warmup(s)) for s in range(5)], [2e-5, 1.5e-5, 1e-5, 5e-6, 0], atol=1e-12
    )
    assert (
        WarmupLinearDecay.from_config(schedule.get_config()).get_config() == schedule.get_config()
    )
    with pytest.raises(ValueError, match="num_warmup_steps <= num_train_steps"):
        WarmupLinearDecay(1e-3, 10, 11)


def test_defaults_and_weight_decay_exclusions():
    model = TextClassifier(tiny_encoder(max_sequence_length=5), 3)
    model.build()
    opt = create_optimizer(2e-5, 100, 10)
    assert isinstance(opt, keras.optimizers.AdamW)
    assert (opt.beta_1, opt.beta_2, opt.epsilon, opt.weight_decay, opt.global_clipnorm) == (
        0.9,
        0.999,
        1e-6,
        0.01,
        1.0,
    )
    decayed = {v.path for v in model.trainable_variables if opt._use_weight_decay(v)}
    skipped = {v.path for v in model.trainable_variables} - decayed
    assert skipped and all(p.rsplit("/", 1)[1] in ("bias", "gamma", "beta") for p in skipped)
    assert all(
        p.rsplit("/", 1)[1] in ("kernel", "embeddings", "position_embeddings") for p in decayed
    )
    assert len(decayed) == 3 + 6 + 2  # word/type/position tables, 6 block kernels, pooler + logits
    # every LayerNormalization's gamma and beta are skipped
    ln = [
        v.path
        for layer in model._flatten_layers()
        if isinstance(layer, keras.layers.LayerNormalization)
        for v in layer.trainable_variables
    ]
    assert len(ln) == 2 * 3 and set(ln) <= skipped  # embeddings + 2 per block


def test_decoupled_weight_decay_step_and_bias_untouched():
    dense = keras.layers.Dense(2)
    dense.build((None, 3))
    dense.bias.assign([1.0, -1.0])
    kernel0 = dense.kernel.numpy()
    opt = create_optimizer(0.1, 10, 0, weight_decay=0.5)
    opt.apply_gradients(
        [(np.zeros((3, 2), "float32"), dense.kernel), (np.zeros(2, "float32"), dense.bias)]
    )
    np.testing.assert_allclose(dense.kernel.numpy(), kernel0 * (1 - 0.1 * 0.5), rtol=1e-6)
    np.testing.assert_array_equal(dense.bias.numpy(), [1.0, -1.0])


def test_global_norm_clipping_and_accumulation():
    v = keras.Variable(np.zeros(2, "float32"))
    opt = create_optimizer(
        1.0, 10, 0, weight_decay=0.0, gradient_accumulation_steps=2, epsilon=1e-12
    )
    opt.apply_gradients([(np.array([3.0, 4.0], "float32"), v)])
    np.testing.assert_array_equal(v.numpy(), [0, 0])  # accumulating
    assert int(opt.iterations) == 0
    opt.apply_gradients([(np.array([3.0, 4.0], "float32"), v)])
    assert int(opt.iterations) == 1
    # Adam's first step moves each coordinate by lr * g/|g| (direction -g), at the schedule's value
    # of update 0 (lr(0) = 1.0), as without accumulation: Keras alone reads it at batch 1 (0.9).
    np.testing.assert_allclose(v.numpy(), [-1.0, -1.0], rtol=1e-5)
    clipped = keras.optimizers.SGD(1.0, global_clipnorm=create_optimizer(1.0, 10).global_clipnorm)
    w = keras.Variable(np.zeros(2, "float32"))
    clipped.apply_gradients([(np.array([3.0, 4.0], "float32"), w)])
    np.testing.assert_allclose(w.numpy(), [-0.6, -0.8], rtol=1e-6)  # norm 5 clipped to 1


def test_lamb_loss_scale_and_errors():
    assert isinstance(create_optimizer(1e-3, 10, optimizer_type="lamb"), keras.optimizers.Lamb)
    scaled = create_optimizer(1e-3, 10, loss_scale=True)
    assert isinstance(scaled, keras.optimizers.LossScaleOptimizer)
    assert isinstance(scaled.inner_optimizer, keras.optimizers.AdamW)
    with pytest.raises(ValueError, match="unknown optimizer_type 'sgd'"):
        create_optimizer(1e-3, 10, optimizer_type="sgd")
    with pytest.raises(ValueError, match="unknown mixed precision mode 'fp8'"):
        set_mixed_precision("fp8")


@pytest.mark.slow
def test_mixed_float16_with_loss_scaling_and_jit_compile_trains():
    set_mixed_precision("mixed_float16")
    try:
        model = TextClassifier(tiny_encoder(max_sequence_length=5), 2, dropout_rate=0.0)
        x = {
            "input_word_ids": np.array([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8]] * 2, "int32"),
            "input_mask": np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]] * 2, "int32"),
            "input_type_ids": np.zeros((4, 5), "int32"),
        }
        model(x)
        assert model.encoder.compute_dtype == "float16" and model(x).dtype == "float32"
        model.compile(
            create_optimizer(1e-2, 6, loss_scale=True),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=True,
        )
        losses = model.fit(x, np.array([0, 1, 0, 1]), batch_size=2, epochs=3, verbose=0).history[
            "loss"
        ]
        assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
        assert int(model.optimizer.iterations) == 6
    finally:
        set_mixed_precision("float32")


def _adamw_pair(**kwargs):
    from keras_bert.training import FusedAdamW

    common = dict(
        learning_rate=WarmupLinearDecay(1e-2, 20, 3),
        weight_decay=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        global_clipnorm=1.0,
        **kwargs,
    )
    fused, plain = FusedAdamW(**common), keras.optimizers.AdamW(**common)
    for opt in (fused, plain):
        opt.exclude_from_weight_decay(var_names=["bias"])
    return fused, plain


@pytest.mark.parametrize("jit_compile", [False, True])
def test_fused_adamw_matches_keras_adamw_step_by_step(jit_compile):
    """Dense and embedding (IndexedSlices) gradients, weight decay with an exclusion, clipping,
    warmup: 6 steps of the fused kernel against Keras's AdamW on identical copies. Keras's AdamW
    is given the embedding gradient dense (its rows summed): its global norm of an IndexedSlices
    is not the gradient's (`ClipsSummedGradients`)."""
    import tensorflow as tf

    def model():
        keras.utils.set_random_seed(1)
        m = keras.Sequential(
            [
                keras.Input((4,), dtype="int32"),
                keras.layers.Embedding(50, 8),
                keras.layers.Flatten(),
                keras.layers.Dense(3),
            ]
        )
        return m

    fused_model, plain_model = model(), model()
    start = [v.numpy() for v in plain_model.trainable_variables]
    fused, plain = _adamw_pair()

    def train_fn(m, opt):
        @tf.function(jit_compile=jit_compile)
        def train(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((m(x) - y) ** 2)
            grads = tape.gradient(loss, m.trainable_variables)
            if opt is plain:
                grads = [tf.convert_to_tensor(g) for g in grads]
            opt.apply_gradients(zip(grads, m.trainable_variables))

        return train

    trains = [train_fn(fused_model, fused), train_fn(plain_model, plain)]
    rng = np.random.default_rng(0)
    for _ in range(6):
        x = rng.integers(0, 50, (5, 4)).astype("int32")
        y = rng.normal(size=(5, 3)).astype("float32")
        for train in trains:
            train(x, y)
    assert int(fused.iterations) == int(plain.iterations) == 6
    # Equal up to rounding: the kernel forms 1 - beta_2 in float32 (0.0010000467 where Keras
    # casts 0.001), a 5e-5 relative difference in the second-moment rate.
    for a, b, a0 in zip(fused_model.trainable_variables, plain_model.trainable_variables, start):
        moved = np.abs(b.numpy() - a0).max()
        assert moved > 1e-3, a.path
        assert np.abs(a.numpy() - b.numpy()).max() <= 1e-4 * moved, a.path
    for a, b in zip(fused.variables, plain.variables):  # iterations, m and v slots
        assert (
            a.path.rsplit("/", 1)[-1].rsplit("_", 1)[-1]
            == b.path.rsplit("/", 1)[-1].rsplit("_", 1)[-1]
        )
        np.testing.assert_allclose(
            np.asarray(a), np.asarray(b), rtol=2e-4, atol=1e-9, err_msg=a.path
        )


def test_create_optimizer_uses_the_fused_kernel_and_round_trips():
    from keras_bert.training import FusedAdamW
    from keras_bert.training.optimizer import AveragedLamb

    opt = create_optimizer(2e-5, 100, 10)
    assert type(opt) is FusedAdamW
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert type(clone) is FusedAdamW and clone.get_config() == opt.get_config()
    lamb = create_optimizer(2e-5, 100, optimizer_type="lamb")
    assert type(lamb) is AveragedLamb and isinstance(lamb, keras.optimizers.Lamb)


# ---- weight averaging (--ema_momentum) ----


def test_weight_average_follows_the_warmed_up_decay_exactly():
    var = keras.Variable([0.0])
    opt = create_optimizer(0.1, 100, 0, weight_decay=0.0, global_clipnorm=None, ema_momentum=0.3)
    opt.build([var])
    w = []
    for g in (1.0, -2.0, 0.5, 3.0, -1.0):
        opt.apply_gradients([(np.array([g], "float32"), var)])
        w.append(float(var.numpy()[0]))
    # decay d_t = min(0.3, (1 + t) / (10 + t)): d_0 = 0 (the average starts at the first weights),
    # d_1 = 2/11, d_2 = 3/12, then capped: d_3 = d_4 = 0.3 (4/13 and 5/14 are larger)
    want = w[0]
    want = 2 / 11 * want + 9 / 11 * w[1]
    want = 3 / 12 * want + 9 / 12 * w[2]
    want = 0.3 * want + 0.7 * w[3]
    want = 0.3 * want + 0.7 * w[4]
    average = opt._model_variables_moving_average[0]
    np.testing.assert_allclose(average.numpy(), [want], rtol=1e-6)
    assert abs(want - w[4]) > 1e-3  # the average is not the last weights
    with pytest.raises(ValueError, match=r"ema_momentum must be in \[0, 1\)"):
        create_optimizer(0.1, 100, ema_momentum=1.0)


@pytest.mark.parametrize("optimizer_type", ["adamw", "lamb"])
def test_averaged_weights_are_swapped_in_and_back_and_fit_keeps_the_trained_ones(optimizer_type):
    from keras_bert.training.optimizer import averaged_weights

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(
        create_optimizer(0.05, 20, 2, optimizer_type=optimizer_type, ema_momentum=0.9), "mse"
    )
    x = np.random.default_rng(0).normal(size=(16, 3)).astype("float32")
    y = np.random.default_rng(1).normal(size=(16, 2)).astype("float32")
    model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    trained = [v.numpy() for v in model.trainable_variables]
    averages = [a.numpy() for a in model.optimizer._model_variables_moving_average]
    # Keras would write the average into the model at the end of fit; the run goes on from the
    # trained weights instead
    assert all(np.abs(t - a).max() > 1e-4 for t, a in zip(trained, averages))
    with averaged_weights(model):
        for v, a in zip(model.trainable_variables, averages):
            np.testing.assert_array_equal(v.numpy(), a)
    for v, t in zip(model.trainable_variables, trained):
        np.testing.assert_array_equal(v.numpy(), t)
    with pytest.raises(RuntimeError, match="inside"):
        with averaged_weights(model):
            raise RuntimeError("inside")
    for v, t in zip(model.trainable_variables, trained):  # restored on an exception too
        np.testing.assert_array_equal(v.numpy(), t)


def test_averaged_weights_without_an_average_changes_nothing():
    from keras_bert.training.optimizer import averaged_weights

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(create_optimizer(0.05, 20, 2), "mse")
    model.fit(np.ones((4, 3), "float32"), np.zeros((4, 2), "float32"), verbose=0)
    before = [v.numpy() for v in model.trainable_variables]
    with averaged_weights(model):
        for v, b in zip(model.trainable_variables, before):
            np.testing.assert_array_equal(v.numpy(), b)


# ---- layer-wise learning-rate decay (--layerwise_lr_decay) ----


def _two_block_classifier():
    model = TextClassifier(tiny_encoder(num_layers=2, max_sequence_length=5), 3)
    model.build()
    return model


def _want_scale(path, decay):  # L = 2: embeddings d^3, block 0 d^2, block 1 d, pooler and head 1
    for part, power in (
        ("/embeddings/", 3),
        ("/transformer_layer_0/", 2),
        ("/transformer_layer_1/", 1),
    ):
        if part in path:
            return decay**power
    return 1.0


def test_layerwise_scales_by_depth():
    from keras_bert.training.optimizer import layerwise_learning_rate_scales

    model = _two_block_classifier()
    paths = [v.path for v in model.trainable_variables]
    scales = dict(zip(paths, layerwise_learning_rate_scales(paths, 0.5)))

    def scale(suffix):  # the models' own names get _1, _2 ... within one test session
        [path] = [p for p in paths if p.endswith(suffix)]
        return scales[path]

    assert scale("/embeddings/word_embeddings/embeddings") == 0.125
    assert scale("/embeddings/layer_norm/gamma") == 0.125
    assert scale("/transformer_layer_0/self_attention/query/kernel") == 0.25
    assert scale("/transformer_layer_1/output_dense/bias") == 0.5
    assert scale("/pooler/kernel") == 1.0
    assert scale("/logits/bias") == 1.0
    assert sorted(set(scales.values())) == [0.125, 0.25, 0.5, 1.0]
    assert layerwise_learning_rate_scales(paths, 1.0) == [1.0] * len(paths)
    with pytest.raises(
        ValueError, match=r"layerwise_lr_decay must be in \(0, 1\] \(1: off\), got 0"
    ):
        layerwise_learning_rate_scales(paths, 0)
    with pytest.raises(
        ValueError, match=r"needs a BERT encoder's variables .* none among 2 variables"
    ):
        layerwise_learning_rate_scales(["dense/kernel", "dense/bias"], 0.8)


@pytest.mark.parametrize("optimizer_type", ["adamw", "lamb"])
def test_layerwise_decay_scales_each_update_and_its_weight_decay(optimizer_type):
    """One step from the same weights and gradients: every variable moves by its scale times
    what it moves with one rate for all (Adam's step and the decoupled weight decay are linear in
    the learning rate; LAMB's step too, but its trust ratio reads the weights after their decay,
    so LAMB is checked without weight decay)."""
    keras.utils.set_random_seed(3)
    model = _two_block_classifier()
    start = [v.numpy() for v in model.trainable_variables]
    rng = np.random.default_rng(0)
    grads = [rng.normal(size=v.shape).astype("float32") for v in model.trainable_variables]
    moves = {}
    for decay in (1.0, 0.5):
        for v, w in zip(model.trainable_variables, start):
            v.assign(w)
        opt = create_optimizer(
            1e-2,
            10,
            0,
            optimizer_type=optimizer_type,
            weight_decay=0.1 if optimizer_type == "adamw" else 0.0,
            global_clipnorm=None,
            layerwise_lr_decay=decay,
        )
        opt.apply_gradients(zip(grads, model.trainable_variables))
        moves[decay] = [v.numpy() - w for v, w in zip(model.trainable_variables, start)]
    for v, uniform, decayed in zip(model.trainable_variables, moves[1.0], moves[0.5]):
        assert np.abs(uniform).max() > 1e-4, v.path
        np.testing.assert_allclose(
            decayed, _want_scale(v.path, 0.5) * uniform, rtol=1e-4, atol=1e-9, err_msg=v.path
        )


def test_layerwise_decay_round_trips_and_refuses_what_it_cannot_place():
    opt = create_optimizer(2e-5, 100, 10, layerwise_lr_decay=0.8)
    assert opt.get_config()["layerwise_lr_decay"] == 0.8
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert clone.layerwise_lr_decay == 0.8 and clone.get_config() == opt.get_config()
    with pytest.raises(ValueError, match=r"layerwise_lr_decay must be in \(0, 1\]"):
        create_optimizer(2e-5, 100, layerwise_lr_decay=1.5)
    dense = keras.layers.Dense(2)
    dense.build((None, 3))
    with pytest.raises(ValueError, match="needs a BERT encoder's variables"):
        create_optimizer(2e-5, 100, layerwise_lr_decay=0.8).build(dense.trainable_variables)
