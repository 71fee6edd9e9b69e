"""`get_strategy`: a tf.distribute strategy from a flag value (SPEC section 1)."""

from __future__ import annotations

import tensorflow as tf

STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")


def get_strategy(
    name: str = "default", tpu: str | None = None, devices=None
) -> tf.distribute.Strategy:
    """Build a distribution strategy.

    Args:
        name: "default" (the current/default strategy: one device), "mirrored" (all local GPUs,
            else all logical CPUs: synchronous data parallelism on one machine),
            "multi_worker_mirrored" (workers from $TF_CONFIG, collective all-reduce), "tpu".
        tpu: for "tpu", the TPU name or grpc:// address ("" or "local" for a TPU VM).
        devices: optional device list for "mirrored", e.g. ["/cpu:0", "/cpu:1"].

    Returns:
        tf.distribute.Strategy. Make it before building models or datasets, and build the model
        and optimizer under `strategy.scope()`. `model.fit` splits each global batch across
        replicas.

    Raises:
        ValueError: unknown name (listing the valid ones), or "tpu" without a TPU.
    """
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        if devices is None:
            gpus = tf.config.list_logical_devices("GPU")
            devices = [d.name for d in gpus] or [
                d.name for d in tf.config.list_logical_devices("CPU")
            ]
        return tf.distribute.MirroredStrategy(devices=devices)
    if name == "multi_worker_mirrored":
        _patch_keras_multi_worker_reduce()
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
                tpu="" if tpu in (None, "local") else tpu
            )
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except (ValueError, tf.errors.NotFoundError, RuntimeError) as e:
            raise ValueError(
                f"--strategy=tpu but no TPU could be reached (tpu={tpu!r}): {e}"
            ) from e
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"unknown strategy {name!r}; use one of {list(STRATEGIES)}")


def _patch_keras_multi_worker_reduce() -> None:
    """Work around tensorflow/tensorflow#72388 (Keras 3 `fit` under MultiWorkerMirroredStrategy).

    Keras 3 (checked on 3.15) reduces every train-step output with
    `strategy.reduce("MEAN", v, axis=0)` under the collective strategy; the outputs are scalar
    metric results, so every step fails with "Invalid reduction dimension 0 for input with 0
    dimensions". Scalars are reduced here with axis=None (the mean over workers of each worker's
    value); anything else goes to Keras unchanged. Idempotent; a no-op once Keras fixes it.
    """
    from keras.src import tree
    from keras.src.backend.tensorflow import trainer as tf_trainer

    original = tf_trainer.reduce_per_replica
    if getattr(original, "_keras_bert_patched", False):
        return

    def reduce_per_replica(values, strategy, reduction):
        if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or reduction not in (
            "auto",
            "mean",
        ):
            return original(values, strategy, reduction)

        def _reduce(v):
            local = strategy.experimental_local_results(v)[0] if hasattr(v, "values") else v
            if getattr(getattr(local, "shape", None), "rank", None) == 0:
                return strategy.reduce("MEAN", v, axis=None)
            return original(v, strategy, reduction)

        return tree.map_structure(_reduce, values)

    reduce_per_replica._keras_bert_patched = True
    tf_trainer.reduce_per_replica = reduce_per_replica
