"""Our encoder (and keras-hub's) in a child process with its own TensorFlow thread-pool sizes.

TensorFlow sizes its intra-op and inter-op pools once per process, so "ours with one thread"
(the setting a latency-bound batch-1 server uses, cf. `python -m serving.server
--tensorflow_intra_op_parallelism=1`) cannot share the parent's process. Same line protocol as
benchmarks/peers/torch_peer.py; started as

    python -m benchmarks.peers.tf_peer INTRA_OP_THREADS INTER_OP_THREADS

  {"cmd": "encoder", "stack": "ours"|"keras-hub", "dtype": "float32"|"bfloat16", "batch": B,
   "seq": T}                                                             -> {"ok": true}
  {"cmd": "run", "key": str}                                             -> {"seconds": float}
  {"cmd": "quit"}
"""

import sys


def main():
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(int(sys.argv[1]))
    tf.config.threading.set_inter_op_parallelism_threads(int(sys.argv[2]))
    import keras_bert
    from benchmarks import common, peers

    encoders = {}

    def load(msg):
        peers.check_command(msg)
        key = (msg.get("stack", "ours"), msg["dtype"])
        if key not in encoders:
            if key[0] == "keras-hub":
                from benchmarks.bench_encoder import keras_hub_fn

                encoders[key] = keras_hub_fn(key[1])
            else:
                encoder = keras_bert.from_pretrained(common.PRESET, dtype=key[1])
                encoders[key] = tf.function(
                    lambda f, encoder=encoder: encoder(f, training=False)["sequence_output"],
                    reduce_retracing=True,
                )
        features = {k: tf.constant(v) for k, v in peers.fixed_input(msg).items()}
        return (lambda: None), (lambda run=encoders[key], f=features: run(f).numpy())

    common.serve_peer(load)


if __name__ == "__main__":
    main()
