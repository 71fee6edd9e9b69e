"""What a computation keeps, for tests that it keeps less: the bytes live in TensorFlow's CPU
allocator, and the forward tensors a backward pass reads.

TensorFlow's CPU allocator counts its bytes (`tf.config.experimental.get_memory_info("CPU:0")`)
when oneDNN is on, TensorFlow's default on x86: the bytes of live tensors, independent of machine
load, unlike resident memory. Its peak within a call depends on the order the executor runs
independent ops in, so tests of what a training step keeps read the graph instead
(`backward_reads`).
"""

import numpy as np
import tensorflow as tf


def allocator_bytes() -> int:
    """Bytes in live tensors of the CPU allocator now."""
    return tf.config.experimental.get_memory_info("CPU:0")["current"]


def stacked_step(layer, layers: int):
    """A `tf.function` x -> d sum(h) / dx of h = layer(h) applied `layers` times from x (a training
    step's shape: every layer's forward tensors wait for its backward pass)."""

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            h = x
            for _ in range(layers):
                h = layer(h)
            y = tf.reduce_sum(h)
        return tape.gradient(y, x)

    return step


def tensor_bytes(reads) -> int:
    """Bytes of the tensors `backward_reads` lists (static shapes)."""
    return sum(dtype.size * int(np.prod(shape)) for _, dtype, shape in reads)


def backward_reads(step, *args) -> list:
    """The forward tensors the backward pass of `step` (a `tf.function` that computes a loss and
    its `tape.gradient`) reads: (name, dtype, shape) of each tensor made outside the backward pass
    and consumed inside it, those being what a training step keeps between the two passes.

    The backward pass is every op downstream (by data or control edges) of the ops that
    `tape.gradient` creates under its `gradient_tape/` name scope, custom gradients' ops included.
    """
    graph = step.get_concrete_function(*args).graph
    consumers = {}
    for op in graph.get_operations():
        for source in [t.op for t in op.inputs] + list(op.control_inputs):
            consumers.setdefault(source.name, []).append(op)
    backward = set()
    stack = [op for op in graph.get_operations() if op.name.startswith("gradient_tape/")]
    while stack:
        op = stack.pop()
        if op.name not in backward:
            backward.add(op.name)
            stack.extend(consumers.get(op.name, []))
    reads = {
        t.name: (t.name, t.dtype, tuple(t.shape.as_list()))
        for op in graph.get_operations()
        if op.name in backward
        for t in op.inputs
        if t.op.name not in backward
    }
    return sorted(reads.values())
