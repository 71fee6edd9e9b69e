"""The REST JSON conversion's two paths agree: whole-array conversion (`_fast_array`,
`_fast_rows`) takes only what the element-by-element port of TF Serving's json_tensor.cc takes,
and gives the same array; everything else falls to that port, which converts it or words its
error. Generated JSON values over every dtype JSON can carry."""

import json

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

from serving.wire import dtypes as dt, errors, json_tensor

DTYPES = [dt.string, dt.bool_, dt.float32, dt.float64, dt.int8, dt.int32, dt.int64, dt.uint8]
DTYPES += [dt.uint32, dt.uint64, dt.float16]
_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**65), 2**65)
    | st.sampled_from([0, 1, -1, 2**24 - 1, 2**24, 2**31, 2**53, 2**63, 2**64 - 1])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([3.4e38, 3.5e38, 1e308, -0.0])
    | st.text(max_size=4)
    | st.just({"b64": "YWJj"})
)
_values = st.recursive(_leaf, lambda children: st.lists(children, max_size=3), max_leaves=16)
# Dense values: lists of lists of one shape, leaves of one kind (what clients send).
_dense = (
    st.integers(0, 3)
    .flatmap(lambda rank: st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
    .flatmap(
        lambda shape: st.sampled_from(
            [st.integers(-(2**64), 2**64), st.floats(), st.booleans(), st.text(max_size=3)]
        ).flatmap(lambda leaf: _nest(shape, leaf))
    )
)


def _nest(shape, leaf):
    if not shape:
        return leaf
    return st.lists(_nest(shape[1:], leaf), min_size=shape[0], max_size=shape[0])


def _slow(value, dtype):
    shape, leaves = json_tensor.dense_shape(value), []
    json_tensor._fill(value, 0, shape, dtype, leaves)
    return json_tensor.to_array(leaves, shape, dtype)


def _same(fast, slow):
    assert fast.dtype == slow.dtype and fast.shape == slow.shape
    if fast.dtype.kind == "f":
        np.testing.assert_array_equal(fast, slow)  # NaN equal to NaN
    else:
        assert fast.tolist() == slow.tolist()


@hypothesis.settings(max_examples=400, deadline=None)
@hypothesis.given(value=_values | _dense, dtype=st.sampled_from(DTYPES))
def test_the_whole_array_path_takes_only_what_the_port_takes_and_gives_the_same(value, dtype):
    # Through JSON, as the server sees it.
    body = json.dumps({"v": value}).encode()
    value = json_tensor.parse_json(body)["v"]
    fast = json_tensor._fast_array(value, dtype, json_tensor.holds_no_booleans(body))
    try:
        slow = _slow(value, dtype)
    except errors.ServingError:
        assert fast is None
        return
    if fast is not None:
        _same(fast, slow)


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(
    rows=st.lists(
        st.fixed_dictionaries(
            {"ids": st.lists(st.integers(-5, 2**40), min_size=2, max_size=2), "text": st.text()}
        ),
        min_size=1,
        max_size=4,
    )
)
def test_rows_of_objects_convert_the_same_on_both_paths(rows):
    dtypes = {"ids": dt.int32, "text": dt.string}
    try:
        slow = json_tensor._row_inputs(rows, dtypes, lambda *_: None)
    except errors.ServingError:
        assert json_tensor._fast_rows(rows, dtypes, sorted(dtypes), True) is None
        return
    fast = json_tensor._fast_rows(rows, dtypes, sorted(dtypes), True)
    assert fast is not None  # the plain case takes the whole-array path
    for name in dtypes:
        _same(fast[name], slow[name])


@pytest.mark.parametrize(
    "value,dtype",
    [
        ([[1, 2], [3, 4]], dt.int32),
        ([[1.5, 2.0]], dt.float32),
        ([1, 2], dt.float32),
        (["a", "é"], dt.string),
        ([True, False], dt.bool_),
        ([], dt.float32),
        ([[], []], dt.int64),
    ],
)
def test_plain_values_take_the_whole_array_path(value, dtype):
    assert json_tensor._fast_array(value, dtype) is not None
    _same(json_tensor._fast_array(value, dtype), _slow(value, dtype))


@pytest.mark.parametrize(
    "value,dtype",
    [
        ([1, True], dt.int32),  # a bool among ints: the port words the error
        ([2**31], dt.int32),
        ([2**24], dt.float32),
        ([1, 2.5], dt.float32),  # mixed kinds: element by element
        ([{"b64": "YQ=="}], dt.string),
        ([[1], 2], dt.int32),
        ([3.5e38], dt.float32),
    ],
)
def test_values_the_port_must_see_fall_back(value, dtype):
    assert json_tensor._fast_array(value, dtype) is None


@pytest.mark.parametrize(
    "body",
    [
        b'{"inputs": [18446744073709551616, 1, -9223372036854775809]}',  # orjson
        b'{"inputs": [18446744073709551616, 1, -9223372036854775809, NaN]}',  # json.loads
    ],
)
def test_long_integers_are_parsed_as_rapidjson_keeps_them(body):
    """Integers outside [-2**63, 2**64) are doubles (rapidjson), whichever parser reads them."""
    values = json_tensor.parse_json(body)["inputs"]
    assert values[:3] == [1.8446744073709552e19, 1, -9.223372036854776e18]
    assert [type(v) for v in values[:3]] == [float, int, float]


def test_integers_without_booleans_in_the_body_go_through_numpy_alone():
    plain = json_tensor._fast_array([[1, 2], [3, 4]], dt.int8, plain_numbers=True)
    assert plain.dtype == np.int8 and plain.tolist() == [[1, 2], [3, 4]]
    # numpy reads True as 1: with a boolean in the body the element path words the error.
    assert json_tensor.holds_no_booleans(b'{"inputs": [1, true]}') is False
    with pytest.raises(errors.ServingError, match="Type: True is not of expected type: int32"):
        json_tensor.value_to_array([1, True], dt.int32, plain_numbers=False)


def test_printing_part_of_a_large_value_costs_only_the_part():
    big = {"instances": [["x" * 10] * 1000] * 1000}
    text = json_tensor.value_to_string(big)
    assert text == json.dumps(big)[:200] + "..."
    deep = json.loads("[" * 900 + "]" * 900)
    assert json_tensor.value_to_string(deep).startswith(("[[[[", "<a JSON Array nested"))


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(values=st.lists(_leaf, max_size=5) | st.lists(st.integers(-(2**64), 2**64)))
def test_a_feature_list_adds_the_same_on_both_paths(values):
    """`make_example`'s whole-list path against value-by-value `_add_to_feature`."""
    from tensorflow.core.example import feature_pb2

    body = json.dumps({"v": values}).encode()
    values = json_tensor.parse_json(body)["v"]
    slow = feature_pb2.Feature()
    try:
        for value in values:
            json_tensor._add_to_feature(value, "f", slow)
    except errors.ServingError:
        assert not json_tensor._add_all_to_feature(values, feature_pb2.Feature())
        return
    fast = feature_pb2.Feature()
    if json_tensor._add_all_to_feature(values, fast):
        assert fast == slow


def _nested_row(depth: int) -> bytes:
    nested = "[" * depth + '"a"' + "]" * depth
    return ('{"instances": [{"text": "a"}, {"text": ' + nested + "}]}").encode()


@pytest.mark.parametrize("depth", [64, 257, 900, 1000])
def test_a_row_nested_too_deeply_is_refused_before_conversion(depth):
    """Row 0 plain, row 1 nested past the 64 dimensions a tensor has here: orjson parses up to
    1,024 levels, and the element-by-element conversion recursed a Python frame per level (1,000
    levels: 500 RecursionError; 64 under the row: numpy's ValueError, 500 too). Every depth past
    the limit is the same 400, for that row."""
    doc = json_tensor.parse_json(_nested_row(depth))
    with pytest.raises(errors.ServingError) as refused:
        json_tensor.predict_inputs(doc, {"text": dt.string})
    assert refused.value.message == (
        "Failed to process element: 1 key: text of 'instances' list. Error: INVALID_ARGUMENT: "
        f"JSON Value makes a tensor of {depth + 1} dimensions (nested lists, the rows "
        "included): a tensor has at most 64"
    )


def test_a_value_at_the_depth_limit_converts_without_recursion():
    """64 levels is allowed (as a columnar input): converted by the loop (not a call per level)
    to its own shape."""
    value = "a"
    for _ in range(64):
        value = [value]
    array, shape = json_tensor.value_to_array(value, dt.string)
    assert shape == [1] * 64 and array.shape == (1,) * 64
    slow = []
    json_tensor._fill(value, 0, shape, dt.string, slow)
    assert slow == [b"a"]
    rows = json_tensor.predict_inputs({"instances": [value[0]]}, {"text": dt.string})
    assert rows[0]["text"].shape == (1,) * 64  # 63 levels in a row, under the row dimension
