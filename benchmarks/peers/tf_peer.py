"""Our encoder (and keras-hub's) in a child process with its own TensorFlow thread-pool sizes, on
the line protocol of torch_peer.py (README.md here):

    python -m benchmarks.peers.tf_peer INTRA_OP_THREADS INTER_OP_THREADS
"""

import sys


def main():
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(int(sys.argv[1]))
    tf.config.threading.set_inter_op_parallelism_threads(int(sys.argv[2]))
    from benchmarks import common, peers
    from benchmarks.bench_encoder import encoder_fn

    encoders = {}

    def load(msg):
        peers.check_command(msg)
        key = (msg.get("stack", "ours"), msg["dtype"])
        if key not in encoders:
            encoders[key] = encoder_fn(*key)[1]
        features = {k: tf.constant(v) for k, v in peers.fixed_input(msg).items()}
        return (lambda: None), (lambda run=encoders[key], f=features: run(f).numpy())

    common.serve_peer(load)


if __name__ == "__main__":
    main()
