"""How closely two float outputs of one model must agree when they were computed along different
paths: another batch shape (a merged or split batch, a padded width), another thread count, or
another runtime (SavedModel against LiteRT, Keras against a SavedModel).

CPU kernels are picked per shape and per instruction set (oneDNN, Eigen and XNNPACK each dispatch
on AVX2, AVX-512, AMX), and a sum taken in another order differs in its last bits: batched
against unbatched probabilities of the test classifier differ by up to 6.0e-8 (one float32 ulp)
on a 2-core AMD EPYC without AVX-512, and are bit-equal on one with it. Stock TensorFlow Serving
does not promise bit-equal batching either. So tests compare such floats with this tolerance,
and the discrete outputs (labels, ids, argmax) exactly. Outputs computed twice along the same
path (same model, same batch, same process settings) stay bit-equal on any CPU and are compared
exactly.
"""

import numpy as np

# float32 probabilities in [0, 1] and scores of order 1: a few ulp, far below any real change.
ACROSS_PATHS = {"rtol": 1e-5, "atol": 1e-6}


def assert_close_across_paths(got, want, err_msg: str = "") -> None:
    """`np.testing.assert_allclose` with `ACROSS_PATHS`."""
    np.testing.assert_allclose(got, want, err_msg=err_msg, **ACROSS_PATHS)
