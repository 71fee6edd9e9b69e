"""serving.wire.tensors.cast: the dtype a signature takes passes through as it is; any other dtype
is cast or refused, float64 included where the signature's dtype has no numpy equivalent."""

import numpy as np
import pytest

from serving.wire import dtypes, errors, tensors
from serving.models.servable import TensorSpec


def spec(dtype):
    return TensorSpec(name="x", dtype=dtype, shape=[-1])


def test_the_signatures_own_dtype_is_the_same_array():
    array = np.array([1, 2], np.int32)
    assert tensors.cast("x", array, spec(dtypes.int32)) is array


def test_int64_is_cast_to_int32_within_range_and_refused_outside():
    cast = tensors.cast("x", np.array([1, 2], np.int64), spec(dtypes.int32))
    assert cast.dtype == np.int32 and cast.tolist() == [1, 2]
    with pytest.raises(errors.ServingError) as info:
        tensors.cast("x", np.array([2**40], np.int64), spec(dtypes.int32))
    assert info.value.message == (
        "input 'x' has values outside the int32 range; cannot cast int64 to int32"
    )


@pytest.mark.parametrize("array", [np.array([1.5]), np.array([1.5], np.float32)])
def test_a_dtype_no_array_holds_refuses_float_inputs(array):
    with pytest.raises(errors.ServingError) as info:
        tensors.cast("x", array, spec(dtypes.as_dtype(dtypes.types_pb2.DT_RESOURCE)))
    assert info.value.message.startswith("input 'x' expects dtype resource but got float")
