"""`get_strategy`: a tf.distribute strategy from a flag value (SPEC section 1)."""
from __future__ import annotations

import tensorflow as tf

STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")


def get_strategy(name: str = "default", tpu: str | None = None, devices=None) -> tf.distribute.Strategy:
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
            devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices=devices)
    if name == "multi_worker_mirrored":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="" if tpu in (None, "local") else tpu)
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except (ValueError, tf.errors.NotFoundError, RuntimeError) as e:
            raise ValueError(f"--strategy=tpu but no TPU could be reached (tpu={tpu!r}): {e}") from e
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"unknown strategy {name!r}; use one of {list(STRATEGIES)}")
