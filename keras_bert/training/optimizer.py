"""The BERT optimizer: AdamW / LAMB with linear warmup and linear decay (BERT §A.2).

google-research/bert `optimization.py`: Adam with decoupled weight decay 0.01 (not on LayerNorm
or bias), beta_1 0.9, beta_2 0.999, epsilon 1e-6, global-norm clipping 1.0, learning rate rising
linearly over the warmup steps, then falling linearly to zero at the last step. LAMB (You et al.
2019) is the large-batch option. Built from Keras 3 optimizers (`keras.optimizers.AdamW/Lamb`,
`global_clipnorm`, `gradient_accumulation_steps`, `LossScaleOptimizer`); AdamW's step runs as
TensorFlow's fused Adam kernel (`FusedAdamW`).
"""
from __future__ import annotations

import contextlib

import keras

# Regex on Keras variable names (`variable.name` is the short name: "kernel", "bias", "gamma",
# "beta", "embeddings"): LayerNorm's gamma/beta and every bias skip weight decay.
NO_WEIGHT_DECAY_PATTERNS = ("bias", "gamma", "beta", "LayerNorm", "layer_norm")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


@keras.saving.register_keras_serializable(package="keras_bert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak * step / warmup for step < warmup, then peak * (total - step) / (total - warmup),
    floored at end_learning_rate; `step` counts optimizer updates (after gradient accumulation).

    This is the continuous form (Hugging Face `get_linear_schedule_with_warmup`); google-research/bert
    decays over all steps and clips by the warmup ramp, which jumps at the end of warmup.
    """

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps=0, end_learning_rate=0.0):
        if num_train_steps < 1 or not 0 <= num_warmup_steps <= num_train_steps:
            raise ValueError(f"need num_train_steps >= 1 and 0 <= num_warmup_steps <= num_train_steps; "
                             f"got {num_train_steps}, {num_warmup_steps}")
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
            0.0, (self.num_train_steps - step) / decay_steps)
        return keras.ops.where(step < self.num_warmup_steps, warm, decayed)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps, "end_learning_rate": self.end_learning_rate}


class WeightAveraging:
    """Mixin: an exponential moving average (EMA) of the trained weights whose decay grows with the
    step, for evaluation and the kept model; training itself runs on the raw weights.

    After update t (0-based) every trainable variable w has an average
        w_avg <- d_t w_avg + (1 - d_t) w,   d_t = min(ema_momentum, (1 + t) / (10 + t)),  d_0 = 0
    (the decay warm-up of TensorFlow's `tf.train.ExponentialMovingAverage(num_updates=t)`): late in
    a run the average spans about the last t/9 updates, capped at 1 / (1 - ema_momentum); early
    and in short runs it follows the weights closely instead of staying near the starting point
    (Keras's fixed `ema_momentum` would keep 90% of the initial weights after 100 updates at 0.999).
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
        for var, average in zip(trainable_variables, self._model_variables_moving_average):
            if average is not None:
                rate = keras.ops.cast(1.0 - decay, var.dtype)
                average.assign(average - rate * (average - var))

    def finalize_variable_values(self, var_list):
        """No-op: the averaged weights are used through `averaged_weights` (see the class doc)."""


@keras.saving.register_keras_serializable(package="keras_bert")
class AveragedLamb(WeightAveraging, keras.optimizers.Lamb):
    """`keras.optimizers.Lamb` with `WeightAveraging`'s decay warm-up when `use_ema`."""


@keras.saving.register_keras_serializable(package="keras_bert")
class FusedAdamW(WeightAveraging, keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` whose Adam step is TensorFlow's fused `ResourceApplyAdam` kernel.

    Same arguments, variables (names, slots), weight decay, clipping, schedules and results as
    AdamW: the kernel computes Keras's own update in one vectorised pass per variable,
        m += (g - m) (1 - beta_1);  v += (g^2 - v) (1 - beta_2)
        var -= lr sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon)
    (Kingma & Ba 2015, algorithm 1 with the epsilon-hat form; TensorFlow
    core/kernels/training_ops.cc), where Keras runs about ten elementwise ops, each a pass over
    the variable, its slots and the gradient. A BERT fine-tuning step spends a sizeable share in
    the optimizer (MiniLM-L6: 22.7M float32 parameters, half of them the word embeddings);
    see benchmarks/RESULTS.md, "fused optimizer". Falls back to Keras's step for `amsgrad` and
    other backends. Sparse (IndexedSlices) gradients are densified first, as Keras's own
    arithmetic does. With `use_ema`, the weight average of `WeightAveraging`.
    """

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad or keras.backend.backend() != "tensorflow":
            return super().update_step(gradient, variable, learning_rate)
        import tensorflow as tf

        dtype = variable.dtype
        local_step = tf.cast(self.iterations + 1, dtype)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=m.handle, v=v.handle,
            beta1_power=tf.pow(tf.cast(self.beta_1, dtype), local_step),
            beta2_power=tf.pow(tf.cast(self.beta_2, dtype), local_step),
            lr=tf.cast(learning_rate, dtype), beta1=tf.cast(self.beta_1, dtype),
            beta2=tf.cast(self.beta_2, dtype), epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(tf.convert_to_tensor(gradient), dtype))


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


def create_optimizer(learning_rate: float, num_train_steps: int, num_warmup_steps: int = 0,
                     optimizer_type: str = "adamw", weight_decay: float = 0.01,
                     beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-6,
                     global_clipnorm: float | None = 1.0, gradient_accumulation_steps: int = 1,
                     end_learning_rate: float = 0.0, loss_scale: bool = False,
                     ema_momentum: float = 0.0) -> keras.optimizers.Optimizer:
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

    Returns:
        keras.optimizers.Optimizer.

    Raises:
        ValueError: unknown optimizer_type, bad step counts, ema_momentum outside [0, 1).
    """
    if not 0.0 <= ema_momentum < 1.0:
        raise ValueError(f"ema_momentum must be in [0, 1) (0: no weight average), got {ema_momentum}")
    schedule = WarmupLinearDecay(learning_rate, num_train_steps, num_warmup_steps, end_learning_rate)
    common = dict(learning_rate=schedule, weight_decay=weight_decay, beta_1=beta_1, beta_2=beta_2,
                  epsilon=epsilon, global_clipnorm=global_clipnorm,
                  gradient_accumulation_steps=gradient_accumulation_steps if gradient_accumulation_steps > 1 else None,
                  use_ema=ema_momentum > 0, ema_momentum=ema_momentum or 0.99)
    if optimizer_type == "adamw":
        opt = FusedAdamW(**common)
    elif optimizer_type == "lamb":
        opt = AveragedLamb(**common)
    else:
        raise ValueError(f"unknown optimizer_type {optimizer_type!r}; use 'adamw' or 'lamb'")
    opt.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY_PATTERNS))
    if loss_scale:
        opt = keras.optimizers.LossScaleOptimizer(opt)
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
    pairs = [(v, a) for v, a in zip(optimizer._trainable_variables,
                                      optimizer._model_variables_moving_average) if a is not None]
    trained = [v.numpy() for v, _ in pairs]
    for var, average in pairs:
        var.assign(average)
    try:
        yield
    finally:
        for (var, _), value in zip(pairs, trained):
            var.assign(value)
