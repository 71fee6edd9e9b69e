"""The BERT optimizer: AdamW / LAMB with linear warmup and linear decay (BERT §A.2).

google-research/bert `optimization.py`: Adam with decoupled weight decay 0.01 (not on LayerNorm
or bias), beta_1 0.9, beta_2 0.999, epsilon 1e-6, global-norm clipping 1.0, learning rate rising
linearly over the warmup steps, then falling linearly to zero at the last step. LAMB (You et al.
2019) is the large-batch option. Built from Keras 3 optimizers (`keras.optimizers.AdamW/Lamb`,
`global_clipnorm`, `gradient_accumulation_steps`, `LossScaleOptimizer`); AdamW's step runs as
TensorFlow's fused Adam kernel (`FusedAdamW`). Fine-tuning options: a moving average of the weights
(`WeightAveraging`) and layer-wise learning-rate decay (`LayerwiseLearningRate`).
"""

from __future__ import annotations

import contextlib
import re

import keras

# Regex on Keras variable names (`variable.name` is the short name: "kernel", "bias", "gamma",
# "beta", "embeddings"): LayerNorm's gamma/beta and every bias skip weight decay.
NO_WEIGHT_DECAY_PATTERNS = ("bias", "gamma", "beta", "LayerNorm", "layer_norm")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
# Where a variable sits in a BERT encoder, from its Keras path
# ("text_classifier/bert_encoder/transformer_layer_3/intermediate/kernel").
_BLOCK_PATTERN = re.compile(r"(?:^|/)transformer_layer_(\d+)/")
_EMBEDDINGS_PATTERN = re.compile(r"(?:^|/)embeddings/")


def _check_layerwise_lr_decay(layerwise_lr_decay):
    if not 0.0 < layerwise_lr_decay <= 1.0:
        raise ValueError(f"layerwise_lr_decay must be in (0, 1] (1: off), got {layerwise_lr_decay}")


def layerwise_learning_rate_scales(variable_paths, layerwise_lr_decay: float) -> list[float]:
    """Learning-rate multipliers of layer-wise learning-rate decay, one per variable path.

    With L Transformer blocks and decay d, a variable of block i (0-based, `transformer_layer_<i>/`
    in its path) gets d^(L - i), the embeddings (`embeddings/`) d^(L + 1), and everything above
    the encoder (pooler, task head) 1: the top block d, the bottom block d^L. L is one more than
    the largest block index among the paths. ELECTRA (Clark et al. 2020, appendix A,
    `layerwise_lr_decay` 0.8); Sun et al. 2019, "How to Fine-Tune BERT for Text Classification?",
    section 5.3.

    Args:
        variable_paths: iterable of str, Keras variable paths.
        layerwise_lr_decay: float in (0, 1]; 1 gives every variable 1.

    Returns:
        list of float, aligned with `variable_paths`.

    Raises:
        ValueError: decay outside (0, 1], or a decay below 1 while no path names a
            `transformer_layer_<i>` (nothing to decay by depth).
    """
    _check_layerwise_lr_decay(layerwise_lr_decay)
    paths = list(variable_paths)
    if layerwise_lr_decay == 1.0:
        return [1.0] * len(paths)
    blocks = [_BLOCK_PATTERN.search(p) for p in paths]
    indices = [int(m.group(1)) for m in blocks if m]
    if not indices:
        raise ValueError(
            "layerwise_lr_decay < 1 needs a BERT encoder's variables (paths with "
            f"'transformer_layer_<i>/'); none among {len(paths)} variables"
        )
    num_layers = max(indices) + 1
    scales = []
    for path, block in zip(paths, blocks):
        if block:
            depth = int(block.group(1)) + 1
        elif _EMBEDDINGS_PATTERN.search(path):
            depth = 0
        else:
            depth = num_layers + 1
        scales.append(float(layerwise_lr_decay) ** (num_layers + 1 - depth))
    return scales


@keras.saving.register_keras_serializable(package="keras_bert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak * step / warmup for step < warmup, then peak * (total - step) / (total - warmup),
    floored at end_learning_rate; `step` counts optimizer updates (after gradient accumulation).

    This is the continuous form (Hugging Face `get_linear_schedule_with_warmup`); google-research/bert
    decays over all steps and clips by the warmup ramp, which jumps at the end of warmup.
    """

    def __init__(
        self, peak_learning_rate, num_train_steps, num_warmup_steps=0, end_learning_rate=0.0
    ):
        if num_train_steps < 1 or not 0 <= num_warmup_steps <= num_train_steps:
            raise ValueError(
                f"need num_train_steps >= 1 and 0 <= num_warmup_steps <= num_train_steps; "
                f"got {num_train_steps}, {num_warmup_steps}"
            )
        self.peak_learning_rate = float(peak_learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.end_learning_rate = float(end_learning_rate)

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        peak, end = self.peak_learning_rate, self.end_learning_rate
        warmup = float(max(self.num_warmup_steps, 1))
        decay_steps = float(max(self.num_train_steps - self.num_warmup_steps, 1))
        warm = peak * step / warmup
        decayed = end + (peak - end) * keras.ops.maximum(
            0.0, (self.num_train_steps - step) / decay_steps
        )
        return keras.ops.where(step < self.num_warmup_steps, warm, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "end_learning_rate": self.end_learning_rate,
        }


class CountsUpdates:
    """Mixin: under gradient accumulation the optimizer's step is the optimizer update, never the
    batch, wherever it is read.

    Keras counts batches in `optimizer._iterations` and updates in `optimizer.iterations`
    (`_iterations // gradient_accumulation_steps`), and reads a `LearningRateSchedule` at
    `_iterations`: a schedule sized in updates (`WarmupLinearDecay(num_train_steps=...)`) would
    then warm up and decay k times too fast and leave the last (k - 1) / k of the run at rate 0.
    Here the schedule is read at `iterations`: update u (0-based) runs at `schedule(u)`, the rate
    it has without accumulation, and so do the decoupled weight decay and the per-block rates
    of `LayerwiseLearningRate`, which read `learning_rate`. `WeightAveraging` moves its average
    on update batches only (`is_update_batch`).
    """

    def _get_current_learning_rate(self):
        if isinstance(self._learning_rate, keras.optimizers.schedules.LearningRateSchedule):
            return self._learning_rate(self.iterations)
        return super()._get_current_learning_rate()

    def is_update_batch(self):
        """Whether the batch being applied now ends an accumulation (always, without one): a
        boolean tensor, read before Keras counts the batch."""
        if not self.gradient_accumulation_steps:
            return keras.ops.convert_to_tensor(True)
        return (self._iterations + 1) % self.gradient_accumulation_steps == 0


class ClipsSummedGradients:
    """Mixin: global-norm clipping measures a sparse gradient with its repeated rows summed.

    The word embeddings' gradient is an `IndexedSlices` with one row per token of the batch, so a
    token that occurs twice has two rows; Keras's `global_norm` squares those rows apart (rows
    (1, 0) and (1, 0) of one id measure sqrt(2) where the gradient, (2, 0), measures 2), and
    clips the batch's gradient by a norm it does not have. Accumulated gradients are dense
    (their sum has the rows summed), so without this a run with --gradient_accumulation_steps
    is clipped otherwise than the same batches taken at once. Here a sparse gradient is made
    dense before clipping (its rows summed, as `tf.convert_to_tensor` does), which the update
    does anyway (`FusedAdamW`, Keras's arithmetic).
    """

    def _clip_gradients(self, grads):
        if self.global_clipnorm:
            import tensorflow as tf

            grads = [
                tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads
            ]
        return super()._clip_gradients(grads)


class WeightAveraging:
    """Mixin: an exponential moving average (EMA) of the trained weights whose decay grows with the
    step, for evaluation and the kept model; training itself runs on the raw weights.

    After update t (0-based) every trainable variable w has an average
        w_avg <- d_t w_avg + (1 - d_t) w,   d_t = min(ema_momentum, (1 + t) / (10 + t)),  d_0 = 0
    (the decay warm-up of TensorFlow's `tf.train.ExponentialMovingAverage(num_updates=t)`): late in
    a run the average spans about the last t/9 updates, capped at 1 / (1 - ema_momentum); early
    and in short runs it follows the weights closely instead of staying near the starting point
    (Keras's fixed `ema_momentum` would keep 90% of the initial weights after 100 updates at 0.999).
    t counts optimizer updates: under gradient accumulation Keras calls this after every batch,
    and the batches that only accumulate leave the average as it is (`CountsUpdates`).
    Polyak & Juditsky 1992; weight averaging for fine-tuning: e.g. Izmailov et al. 2018 (SWA).

    `finalize_variable_values` does nothing: Keras would write the average into the model at the
    end of every `fit` call (one per epoch in `resumable_fit`), and training would continue from
    it. Evaluate and save the averaged weights inside `averaged_weights(model)` instead.
    """

    def _update_model_variables_moving_average(self, trainable_variables):
        if not self.use_ema:
            return
        step = keras.ops.cast(self.iterations, "float32")
        decay = keras.ops.minimum(float(self.ema_momentum), (1.0 + step) / (10.0 + step))
        decay = keras.ops.where(step > 0, decay, 0.0)
        moves = keras.ops.where(self.is_update_batch(), 1.0 - decay, 0.0)
        for var, average in zip(trainable_variables, self._model_variables_moving_average):
            if average is not None:
                rate = keras.ops.cast(moves, var.dtype)
                average.assign(average - rate * (average - var))

    def finalize_variable_values(self, var_list):
        """No-op: the averaged weights are used through `averaged_weights` (see the class doc)."""


class LayerwiseLearningRate:
    """Mixin: layer-wise learning-rate decay, `layerwise_lr_decay` in (0, 1] (1: off).

    Each variable's learning rate (in the update and in the decoupled weight decay, as in
    ELECTRA's optimizer) is the schedule's value times its `layerwise_learning_rate_scales`
    multiplier, fixed when the optimizer is built from the variables' paths: the task head at the
    full rate, each Transformer block below it d times the one above, the embeddings lowest.
    """

    def __init__(self, *args, layerwise_lr_decay=1.0, **kwargs):
        super().__init__(*args, **kwargs)
        _check_layerwise_lr_decay(layerwise_lr_decay)
        self.layerwise_lr_decay = float(layerwise_lr_decay)
        self._learning_rate_scales = None

    def build(self, var_list):
        super().build(var_list)
        self._learning_rate_scales = layerwise_learning_rate_scales(
            [v.path for v in var_list], self.layerwise_lr_decay
        )

    def _scaled_learning_rate(self, learning_rate, variable):
        if self.layerwise_lr_decay == 1.0:
            return learning_rate
        return learning_rate * self._learning_rate_scales[self._get_variable_index(variable)]

    def _apply_weight_decay(self, variables):
        if self.layerwise_lr_decay == 1.0 or self.weight_decay is None:
            return super()._apply_weight_decay(variables)
        import tensorflow as tf

        def apply(distribution, variables):  # as Keras's TensorFlow backend, the rate scaled
            def decay(variable):
                if self._use_weight_decay(variable):
                    lr = tf.cast(
                        self._scaled_learning_rate(self.learning_rate, variable), variable.dtype
                    )
                    variable.assign_sub(variable * tf.cast(self.weight_decay, variable.dtype) * lr)

            for variable in variables:
                if isinstance(variable, keras.Variable):
                    variable = variable.value
                distribution.extended.update(variable, decay, group=False)

        tf.__internal__.distribute.interim.maybe_merge_call(
            apply, self._distribution_strategy, variables
        )

    def get_config(self):
        return super().get_config() | {"layerwise_lr_decay": self.layerwise_lr_decay}


@keras.saving.register_keras_serializable(package="keras_bert")
class AveragedLamb(
    CountsUpdates,
    ClipsSummedGradients,
    LayerwiseLearningRate,
    WeightAveraging,
    keras.optimizers.Lamb,
):
    """`keras.optimizers.Lamb` with `CountsUpdates`' step, `ClipsSummedGradients`' norm,
    `WeightAveraging`'s decay warm-up when `use_ema` and
    `LayerwiseLearningRate`'s per-block rates when `layerwise_lr_decay` < 1."""

    def update_step(self, gradient, variable, learning_rate):
        return super().update_step(
            gradient, variable, self._scaled_learning_rate(learning_rate, variable)
        )


@keras.saving.register_keras_serializable(package="keras_bert")
class FusedAdamW(
    CountsUpdates,
    ClipsSummedGradients,
    LayerwiseLearningRate,
    WeightAveraging,
    keras.optimizers.AdamW,
):
    """`keras.optimizers.AdamW` whose Adam step is TensorFlow's fused `ResourceApplyAdam` kernel.

    Same arguments, variables (names, slots), weight decay, clipping, schedules and results as
    AdamW: the kernel computes Keras's own update in one vectorised pass per variable,
        m += (g - m) (1 - beta_1);  v += (g^2 - v) (1 - beta_2)
        var -= lr sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon)
    (Kingma & Ba 2015, algorithm 1 with the epsilon-hat form; TensorFlow
    core/kernels/training_ops.cc), where Keras runs about ten elementwise ops, each a pass over
    the variable, its slots and the gradient. A BERT fine-tuning step spends a sizeable share in
    the optimizer (MiniLM-L6: 22.7M float32 parameters, half of them the word embeddings);
    see docs/results/fine-tuning.md, "fused optimizer". Falls back to Keras's step for `amsgrad` and
    other backends. Sparse (IndexedSlices) gradients are densified first, as Keras's own
    arithmetic does. The step is the optimizer update (`CountsUpdates`); clipping measures the
    summed gradient (`ClipsSummedGradients`). With `use_ema`, the weight average of `WeightAveraging`; with
    `layerwise_lr_decay` < 1, `LayerwiseLearningRate`'s per-block rates.
    """

    def update_step(self, gradient, variable, learning_rate):
        learning_rate = self._scaled_learning_rate(learning_rate, variable)
        if self.amsgrad or keras.backend.backend() != "tensorflow":
            return super().update_step(gradient, variable, learning_rate)
        import tensorflow as tf

        dtype = variable.dtype
        local_step = tf.cast(self.iterations + 1, dtype)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=m.handle,
            v=v.handle,
            beta1_power=tf.pow(tf.cast(self.beta_1, dtype), local_step),
            beta2_power=tf.pow(tf.cast(self.beta_2, dtype), local_step),
            lr=tf.cast(learning_rate, dtype),
            beta1=tf.cast(self.beta_1, dtype),
            beta2=tf.cast(self.beta_2, dtype),
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(tf.convert_to_tensor(gradient), dtype),
        )


@keras.saving.register_keras_serializable(package="keras_bert")
class CountingLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """`keras.optimizers.LossScaleOptimizer` (dynamic loss scaling, for mixed_float16) whose
    skipped batch still counts under gradient accumulation.

    Keras skips a batch whose gradient overflowed without telling the inner optimizer, so its
    batch counter stops: every later update would end one batch after a multiple of k, while
    the driver's counters (checkpoints, evaluations, the time budget, TensorBoard, the run's end)
    count windows of k batches, and the run's last window would stay accumulated, never applied.
    Here the skipped batch counts as one of its window's k, and the gradient accumulated so far
    in that window is dropped (as a float16 step whose sum overflowed is skipped whole): the
    window's later batches still make its update.
    """

    def _stateful_handle_non_finite_grads(self):
        super()._stateful_handle_non_finite_grads()
        inner = self.inner_optimizer
        if inner.gradient_accumulation_steps:
            inner._backend_reset_gradient_accumulators()
            inner._iterations.assign_add(1)


def set_mixed_precision(mode: str | None) -> str:
    """Set the global Keras dtype policy; mode in PRECISIONS (None/"" = float32). Returns it.

    Raises:
        ValueError: unknown mode.
    """
    mode = mode or "float32"
    if mode not in PRECISIONS:
        raise ValueError(f"unknown mixed precision mode {mode!r}; use one of {list(PRECISIONS)}")
    keras.mixed_precision.set_global_policy(mode)
    return mode


def create_optimizer(
    learning_rate: float,
    num_train_steps: int,
    num_warmup_steps: int = 0,
    optimizer_type: str = "adamw",
    weight_decay: float = 0.01,
    beta_1: float = 0.9,
    beta_2: float = 0.999,
    epsilon: float = 1e-6,
    global_clipnorm: float | None = 1.0,
    gradient_accumulation_steps: int = 1,
    end_learning_rate: float = 0.0,
    loss_scale: bool = False,
    ema_momentum: float = 0.0,
    layerwise_lr_decay: float = 1.0,
) -> keras.optimizers.Optimizer:
    """The BERT optimizer.

    Args:
        learning_rate: peak learning rate (after warmup).
        num_train_steps: total optimizer updates (batches / gradient_accumulation_steps).
        num_warmup_steps: updates of linear warmup from 0.
        optimizer_type: "adamw" or "lamb".
        weight_decay: decoupled weight decay, not applied to NO_WEIGHT_DECAY_PATTERNS variables.
        global_clipnorm: clip gradients to this global norm (None: no clipping).
        gradient_accumulation_steps: apply an update every N batches with the mean gradient.
        loss_scale: wrap in `LossScaleOptimizer` (dynamic loss scaling, for mixed_float16).
        ema_momentum: in [0, 1); > 0 keeps an exponential moving average of the weights with this
            largest decay (`WeightAveraging`); evaluate it with `averaged_weights`. 0: none.
        layerwise_lr_decay: in (0, 1]; < 1 scales each variable's learning rate by its depth in
            a BERT encoder (`layerwise_learning_rate_scales`). 1: one rate for all.

    Returns:
        keras.optimizers.Optimizer.

    Raises:
        ValueError: unknown optimizer_type, bad step counts, ema_momentum outside [0, 1),
            layerwise_lr_decay outside (0, 1]; when built, a layerwise_lr_decay < 1 on variables
            that are not a BERT encoder's.
    """
    if not 0.0 <= ema_momentum < 1.0:
        raise ValueError(
            f"ema_momentum must be in [0, 1) (0: no weight average), got {ema_momentum}"
        )
    schedule = WarmupLinearDecay(
        learning_rate, num_train_steps, num_warmup_steps, end_learning_rate
    )
    common = dict(
        learning_rate=schedule,
        weight_decay=weight_decay,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        global_clipnorm=global_clipnorm,
        gradient_accumulation_steps=gradient_accumulation_steps
        if gradient_accumulation_steps > 1
        else None,
        use_ema=ema_momentum > 0,
        ema_momentum=ema_momentum or 0.99,
        layerwise_lr_decay=layerwise_lr_decay,
    )
    if optimizer_type == "adamw":
        opt = FusedAdamW(**common)
    elif optimizer_type == "lamb":
        opt = AveragedLamb(**common)
    else:
        raise ValueError(f"unknown optimizer_type {optimizer_type!r}; use 'adamw' or 'lamb'")
    opt.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY_PATTERNS))
    if loss_scale:
        opt = CountingLossScaleOptimizer(opt)
    return opt


def _weight_averaging_optimizer(model):
    optimizer = getattr(model, "optimizer", None)
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)  # LossScaleOptimizer
    if not getattr(optimizer, "use_ema", False) or not optimizer.built:
        return None
    return optimizer


@contextlib.contextmanager
def averaged_weights(model):
    """Inside the block the model's trainable variables hold the optimizer's weight average;
    after it (also on an exception) they hold the trained weights again.

    Does nothing when the optimizer keeps no average (`ema_momentum=0`), is not built, or has not
    made an update yet. Costs a host copy of the trainable weights (4 bytes per parameter).
    """
    optimizer = _weight_averaging_optimizer(model)
    if optimizer is None or int(optimizer.iterations.numpy()) == 0:
        yield
        return
    pairs = [
        (v, a)
        for v, a in zip(optimizer._trainable_variables, optimizer._model_variables_moving_average)
        if a is not None
    ]
    trained = [v.numpy() for v, _ in pairs]
    for var, average in pairs:
        var.assign(average)
    try:
        yield
    finally:
        for (var, _), value in zip(pairs, trained):
            var.assign(value)
