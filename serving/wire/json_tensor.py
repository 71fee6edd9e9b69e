"""TensorFlow Serving's REST JSON layer: request JSON -> tensors / tf.Examples, outputs -> JSON text.

A port of `tensorflow_serving/util/json_tensor.cc` (FillPredictRequestFromJson,
FillClassificationRequestFromJson / FillRegressionRequestFromJson, MakeJsonFromTensors,
MakeJsonFromClassificationResult / MakeJsonFromRegressionResult): the same acceptance rules, the same
error texts (INVALID_ARGUMENT unless noted) and the same number formatting. The conformance tests
(tests/serving/test_rest_conformance.py) replay that file's own test cases.

Rules clients can rely on (all as TF Serving):
- Row format (`"instances"`, a non-empty list): every element is one batch row; with several inputs
  each element is an object holding exactly the signature's input names (an unknown or a missing
  key is an error). Columnar format (`"inputs"`): one value per input; with several inputs an object
  that must name every input, where keys that are not inputs are ignored.
- Tensor shapes come from the JSON nesting (first element at each level); ragged lists are errors.
- dtypes come from the signature: float/double accept any JSON number that converts without loss
  (integers up to 2^24-1 / 2^53-1, finite decimals within range, NaN/Infinity); int8/16/32/uint8
  accept integers in int32 range, int64 in int64, uint32/uint64 in theirs; bool only true/false;
  string a JSON string or `{"b64": "..."}` (standard alphabet; padding optional; ASCII whitespace
  inside skipped; '-' '_' are errors). Other dtypes: UNIMPLEMENTED.
- Output floats print with 6 significant digits when that round-trips, else full precision, with
  `.0` on whole numbers; NaN / Infinity / -Infinity as bare tokens. Strings print as text; outputs
  whose name ends in `_bytes` as `{"b64": ...}`.
Deliberate difference: a string output that is not valid UTF-8 prints as `{"b64": ...}` (TF Serving
writes the raw bytes, which makes the whole response invalid JSON).
"""

import itertools
import json
import math

import grpc
import numpy as np
import orjson

from serving.wire import dtypes as dt, errors
from tensorflow.core.example import feature_pb2

ROW, COLUMNAR = "row", "columnar"
_SPACE = " \t\n\v\f\r"  # absl::ascii_isspace
_B64 = {
    c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
}
_INT_RANGES = {
    dt.int8: (-(2**31), 2**31 - 1),
    dt.int16: (-(2**31), 2**31 - 1),
    dt.int32: (-(2**31), 2**31 - 1),
    dt.uint8: (-(2**31), 2**31 - 1),
    dt.int64: (-(2**63), 2**63 - 1),
    dt.uint32: (0, 2**32 - 1),
    dt.uint64: (0, 2**64 - 1),
}
_MAX_EXACT_INT = {dt.float32: 2**24 - 1, dt.float64: 2**53 - 1}


# ------------------------------------------------------------------ parsing helpers
def _parse_int(text):
    value = int(text)
    return value if -(2**63) <= value < 2**64 else float(text)  # rapidjson keeps these as double


def parse_json(body: bytes):
    """The request body as a JSON object (dict). Raises INVALID_ARGUMENT like TF Serving's ParseJson."""
    if not body:
        raise errors.invalid_argument("JSON Parse error: The document is empty")
    try:
        # orjson keeps integers outside [-2**63, 2**64) as doubles, as rapidjson does.
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        # What orjson does not take (NaN / Infinity, numbers past a double, lone surrogates,
        # nesting past 1,024 levels, errors) Python's parser reads, or words the error of.
        doc = _parse_with_python(body)
    if not isinstance(doc, dict):
        raise errors.invalid_argument(f"JSON Value: {value_to_string(doc)} Is not object")
    return doc


def _parse_with_python(body: bytes):
    """json.loads with TF Serving's errors; integers outside [-2**63, 2**64) become doubles, as
    rapidjson keeps them (`_parse_int`)."""
    try:
        doc = json.loads(body, parse_int=_parse_int)
    except UnicodeDecodeError:
        raise errors.invalid_argument("JSON Parse error: Invalid encoding in string.") from None
    except RecursionError:  # Python's decoder stops at its recursion limit (about 1,000 levels)
        raise errors.invalid_argument(
            "JSON Parse error: arrays or objects nested too deeply to parse"
        ) from None
    except json.JSONDecodeError as e:
        what = "Invalid value" if e.msg.startswith("Expecting value") else e.msg
        raise errors.invalid_argument(f"JSON Parse error: {what} at offset: {e.pos}") from None
    return doc


def json_type(value) -> str:
    """rapidjson's type name of a parsed JSON value."""
    if value is None:
        return "Null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, list):
        return "Array"
    return "String" if isinstance(value, str) else "Number"


def value_to_string(value, limit=200) -> str:
    """`value` as JSON text for an error message, cut at `limit` characters. The text is made
    piece by piece and only up to the cut, so printing a part of a 64 MB body costs what the
    part costs (a value nested too deeply to print is described, not printed)."""
    pieces, size = [], 0
    try:
        for piece in _PRINTER.iterencode(value):
            pieces.append(piece)
            size += len(piece)
            if size > limit:
                break
    except RecursionError:
        return f"<a JSON {json_type(value)} nested too deeply to print>"
    text = "".join(pieces)
    return text if len(text) <= limit else text[:limit] + "..."


_PRINTER = json.JSONEncoder(ensure_ascii=False)


def signature_name(doc) -> str:
    """The optional "signature_name" ("" when absent); INVALID_ARGUMENT when it is not a string."""
    name = doc.get("signature_name", "")
    if not isinstance(name, str):
        raise errors.invalid_argument(
            f"JSON Value: {value_to_string(doc)} not formatted correctly. "
            "'signature_name' key must be a string value."
        )
    return name


def is_b64_object(value) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def b64_unescape(text: str):
    """absl::Base64Unescape: bytes, or None when `text` is not standard base64.

    Whitespace (absl::ascii_isspace) anywhere is skipped; padding ('=' or '.') is optional but, when
    present, must be exactly the missing count; the web-safe '-' and '_' are invalid.
    """
    out, temp, state, end = bytearray(), 0, 0, len(text)
    for i, ch in enumerate(text):
        if ch in _B64:
            temp, state = (temp << 6) | _B64[ch], state + 1
            if state == 4:
                out += temp.to_bytes(3, "big")
                temp, state = 0, 0
        elif ch in "=.":
            end = i
            break
        elif ch not in _SPACE:
            return None
    if state == 1:
        return None
    expected = {0: 0, 2: 2, 3: 1}[state]
    if state == 2:
        out.append((temp >> 4) & 0xFF)
    elif state == 3:
        out += ((temp >> 2) & 0xFFFF).to_bytes(2, "big")
    equals = 0
    for ch in text[end:]:
        if ch in "=.":
            equals += 1
        elif ch not in _SPACE:
            return None
    return bytes(out) if equals in (0, expected) else None


def decode_b64_object(value) -> bytes:
    if not is_b64_object(value):
        raise errors.invalid_argument(
            f"JSON Value: {value_to_string(value)} not formatted correctly for base64 data"
        )
    decoded = b64_unescape(value["b64"])
    if decoded is None:
        raise errors.invalid_argument("Unable to base64 decode")
    return decoded


# ------------------------------------------------------------------ JSON value -> tensor
def _is_lossless(value, dtype) -> bool:
    """IsLosslessDecimal<float|double>: integers up to 2^digits - 1, decimals within range."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return True
        info = np.finfo(dtype.as_numpy_dtype)
        return float(info.min) <= value <= float(info.max)
    return abs(value) <= _MAX_EXACT_INT[dtype]


def dtype_string(dtype) -> str:
    """TensorFlow's DataTypeString (C++ names: float, double, half; others as tf.DType.name)."""
    return {dt.float32: "float", dt.float64: "double", dt.float16: "half"}.get(dtype, dtype.name)


def _type_error(value, dtype):
    return errors.invalid_argument(
        f"JSON Value: {value_to_string(value)} Type: {json_type(value)} is "
        f"not of expected type: {dtype_string(dtype)}"
    )


def _scalar(value, dtype):
    """AddValueToTensor: one JSON leaf converted for `dtype` (a `serving.wire.dtypes.DType`)."""
    if dtype == dt.string:
        if isinstance(value, dict):
            return decode_b64_object(value)
        if not isinstance(value, str):
            raise _type_error(value, dtype)
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, dict):
        raise _type_error(value, dtype)
    if dtype in (dt.float32, dt.float64):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _type_error(value, dtype)
        if not _is_lossless(value, dtype):
            raise errors.invalid_argument(
                f"Cannot convert JSON value: {value_to_string(value)} to "
                f"{'float' if dtype == dt.float32 else 'double'} without "
                "loss of precision."
            )
        return float(value)
    if dtype == dt.bool_:
        if not isinstance(value, bool):
            raise _type_error(value, dtype)
        return value
    if dtype in _INT_RANGES:
        low, high = _INT_RANGES[dtype]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _type_error(value, dtype)
        return value
    raise errors.ServingError(
        grpc.StatusCode.UNIMPLEMENTED,
        f"Conversion of JSON Value: {value_to_string(value)} to type: {dtype_string(dtype)}",
    )


# The deepest nesting of an input value a request may send: the most dimensions a numpy array
# (and so a tensor here) has; TF Serving refuses REST JSON nested past 256 levels, and its
# tensors stop at 254 dimensions.
MAX_DEPTH = 64


def dense_shape(value) -> list:
    """GetDenseTensorShape: sizes along the first element of each nesting level."""
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _fill(value, level, shape, dtype, out):
    """FillTensorProto: appends the leaves of `value` to `out`, checking it is dense with `shape`.

    A loop over an explicit stack, not a call per level: a value nested past the shape is
    refused at the first level too deep, and no request reaches Python's recursion limit."""
    rank = len(shape)
    stack = [(value, level)]
    while stack:
        value, level = stack.pop()
        if not isinstance(value, list):
            if level != rank:
                raise errors.invalid_argument(
                    f"JSON Value: {value_to_string(value)} found at incorrect "
                    f"level: {level + 1} in the JSON DOM. Expected at level: {rank}"
                )
            out.append(_scalar(value, dtype))
            continue
        if level >= rank:
            raise errors.invalid_argument(
                f"Encountered list at unexpected level: {level} expected < {rank}"
            )
        if len(value) != shape[level]:
            raise errors.invalid_argument(
                f"Encountered list at unexpected size: {len(value)} at level: "
                f"{level} expected size: {shape[level]}"
            )
        stack.extend((item, level + 1) for item in reversed(value))


def check_depth(shape) -> None:
    """Refuses a tensor whose nesting (`dense_shape`, the row dimension included) is deeper
    than MAX_DEPTH, before any of it is converted."""
    if len(shape) > MAX_DEPTH:
        raise errors.invalid_argument(
            f"JSON Value makes a tensor of {len(shape)} dimensions (nested lists, the rows "
            f"included): a tensor has at most {MAX_DEPTH}"
        )


def to_array(values, shape, dtype) -> np.ndarray:
    """Leaves (already converted by `_scalar`) -> numpy array of `dtype` and `shape`."""
    if dtype == dt.string:
        array = np.empty(len(values), dtype=object)
        array[:] = values
        return array.reshape(shape)
    if dtype.is_integer:  # int8/int16/uint8 wrap like TensorProto's int_val does
        return (
            np.array(values, dtype=np.int64 if dtype != dt.uint64 else np.uint64)
            .astype(dtype.as_numpy_dtype)
            .reshape(shape)
        )
    return np.array(values, dtype=dtype.as_numpy_dtype).reshape(shape)


def _dense_leaves(value, shape):
    """The leaves of `value` in row-major order when it is a dense nest of lists of `shape` whose
    leaves are not lists, else None. Each level is checked and flattened by C loops (`map`,
    `set`, `chain`), not a Python call per element."""
    nodes = [value]
    for size in shape:
        if set(map(type, nodes)) != {list} or set(map(len, nodes)) != {size}:
            return None if nodes else []
        nodes = list(itertools.chain.from_iterable(nodes))
    return None if list in set(map(type, nodes)) else nodes


def _integer_array(value, shape, dtype):
    """numpy's own conversion of a nest of JSON integers (C loops throughout), for a body that
    holds no `true` / `false` (numpy would read them as 1 / 0); None unless every leaf is an
    integer that `dtype` takes and the nest is dense with `shape`."""
    try:
        array = np.array(value)
    except (ValueError, OverflowError, TypeError):
        return None
    if array.dtype.kind not in "iu" or array.shape != tuple(shape) or not array.size:
        return None
    low, high = int(array.min()), int(array.max())
    if dtype in _MAX_EXACT_INT:
        if max(-low, high) > _MAX_EXACT_INT[dtype]:
            return None
        return array.astype(dtype.as_numpy_dtype)
    if not _INT_RANGES[dtype][0] <= low <= high <= _INT_RANGES[dtype][1]:
        return None
    wide = np.uint64 if dtype == dt.uint64 else np.int64  # int8/int16/uint8 wrap, as int_val
    return array.astype(wide).astype(dtype.as_numpy_dtype)


def _fast_array(value, dtype, plain_numbers=False):
    """`value` as a numpy array of `dtype` by whole-array conversion, or None when it is not the
    plain case (dense, one JSON type of leaf that `dtype` takes, every value in range); then the
    element-by-element path (`_fill`, `_scalar`) converts it or words its error. Both accept and
    produce the same: this path only takes what that one would take unchanged.
    `plain_numbers`: the body holds no `true` / `false`, so integers go through numpy alone."""
    shape = dense_shape(value)
    check_depth(shape)
    if plain_numbers and (dtype in _MAX_EXACT_INT or dtype in _INT_RANGES):
        array = _integer_array(value, shape, dtype)
        if array is not None:
            return array
    leaves = _dense_leaves(value, shape)
    if leaves is None:
        return None
    if not leaves:
        return to_array([], shape, dtype) if dtype in _FAST_DTYPES else None
    kinds = set(map(type, leaves))
    if dtype == dt.string:
        if kinds != {str}:
            return None  # {"b64": ...} objects or wrong types: element by element
        return to_array([x.encode("utf-8", "surrogatepass") for x in leaves], shape, dtype)
    if dtype == dt.bool_:
        return np.array(leaves, np.bool_).reshape(shape) if kinds == {bool} else None
    if kinds != {int}:
        if kinds == {float} and dtype in (dt.float32, dt.float64):
            array = np.array(leaves, np.float64)
            finite = array[np.isfinite(array)]
            if finite.size and np.abs(finite).max() > np.finfo(dtype.as_numpy_dtype).max:
                return None
            return array.astype(dtype.as_numpy_dtype).reshape(shape)
        return None
    low, high = min(leaves), max(leaves)
    if dtype in _MAX_EXACT_INT:
        if max(-low, high) > _MAX_EXACT_INT[dtype]:
            return None
        return np.array(leaves, np.float64).astype(dtype.as_numpy_dtype).reshape(shape)
    if (
        dtype not in _INT_RANGES
        or not _INT_RANGES[dtype][0] <= low <= high <= _INT_RANGES[dtype][1]
    ):
        return None
    return to_array(leaves, shape, dtype)


_FAST_DTYPES = {dt.string, dt.bool_, *_MAX_EXACT_INT, *_INT_RANGES}


def value_to_array(value, dtype, check=None, plain_numbers=False):
    """(numpy array, shape) of one JSON value for an input of `dtype`; `check(shape)`, when
    given, sees the shape its nesting declares before any element is converted
    (`plain_numbers`: see `_fast_array`)."""
    shape = dense_shape(value)
    if check is not None:
        check(shape)  # the signature's rank first: its refusal says more
    check_depth(shape)
    array = _fast_array(value, dtype, plain_numbers)
    if array is not None:
        return array, shape
    leaves = []
    _fill(value, 0, shape, dtype, leaves)
    return to_array(leaves, shape, dtype), shape


def _shape_string(shape):
    return "[" + ",".join(str(d) for d in shape) + "]"


# ------------------------------------------------------------------ predict requests
def _no_check(alias, shape):
    return None


def predict_inputs(doc, dtypes: dict, check=_no_check, plain_numbers=False):
    """FillPredictRequestFromJson after the signature is known.

    Args:
        doc: the parsed request object. dtypes: dict input alias -> `serving.wire.dtypes.DType` (the
            signature's inputs). check: `check(alias, shape)` sees each input's whole shape as
            the body declares it (the row count, then the first row's nesting) before any of its
            elements is converted, and raises to refuse it (`serving.wire.tensors.check_shape`).
        plain_numbers: the body holds no `true` / `false` literal (`holds_no_booleans`), which
            lets integers be converted by numpy alone.
    Returns:
        (dict alias -> numpy array, ROW or COLUMNAR).
    Raises:
        ServingError INVALID_ARGUMENT (UNIMPLEMENTED for a dtype JSON cannot carry).
    """
    has_instances, has_inputs = "instances" in doc, "inputs" in doc
    if has_instances and has_inputs:
        raise errors.invalid_argument(
            f"JSON Value: {value_to_string(doc)} Not formatted correctly "
            "expecting only one of 'inputs' or 'instances' keys to exist "
        )
    if has_instances:
        instances = _nonempty_array(
            doc,
            "instances",
            "Expecting 'instances' to be an list/array",
            "No values in 'instances' array",
        )
        return _row_inputs(instances, dtypes, check, plain_numbers), ROW
    if has_inputs:
        return _columnar_inputs(doc["inputs"], dtypes, check, plain_numbers), COLUMNAR
    raise errors.invalid_argument("Missing 'inputs' or 'instances' key")


def _is_element_object(value):
    return isinstance(value, dict) and not is_b64_object(value)


class _Batch:
    """AddInstanceItem's bookkeeping: the first row fixes each input's size and shape."""

    def __init__(self, dtypes):
        self.dtypes, self.leaves, self.shapes = dtypes, {}, {}

    def add(self, name, value):
        if name not in self.dtypes:
            raise errors.invalid_argument(f"JSON object: does not have named input: {name}")
        shape, leaves = dense_shape(value), []
        check_depth([0, *shape])  # each row's own nesting, under the row dimension, first
        _fill(value, 0, shape, self.dtypes[name], leaves)
        if name not in self.shapes:
            self.shapes[name], self.leaves[name] = shape, leaves
            return
        want = self.shapes[name]
        if len(leaves) != int(np.prod(want)):
            raise errors.invalid_argument(
                f"Expecting tensor size: {int(np.prod(want))} but got: {len(leaves)}"
            )
        if shape != want:
            raise errors.invalid_argument(
                f"Expecting shape {_shape_string(want)} but got: {_shape_string(shape)}"
            )
        self.leaves[name].extend(leaves)

    def arrays(self, rows):
        return {
            name: to_array(self.leaves[name], [rows] + self.shapes[name], self.dtypes[name])
            for name in self.leaves
        }


def holds_no_booleans(body: bytes) -> bool:
    """True when the request body has no `true` / `false` anywhere (strings included), so no
    parsed value is a bool (`predict_inputs`' plain_numbers)."""
    return b"true" not in body and b"false" not in body


def _fast_rows(instances, dtypes, names, objects, plain_numbers=False):
    """The plain case of the row format converted input by input as whole arrays: every row an
    object holding exactly the input names (or, with one input, every row a value), each input's
    rows dense and of one shape. None otherwise (then the row-by-row path converts it or words
    its error)."""
    if objects:
        keys = set(names)
        if "b64" in keys or not all(type(e) is dict and e.keys() == keys for e in instances):
            return None
        columns = {name: [e[name] for e in instances] for name in names}
    else:
        columns = {names[0]: instances}
    arrays = {}
    for name, column in columns.items():
        arrays[name] = _fast_array(column, dtypes[name], plain_numbers)
        if arrays[name] is None:
            return None
    return arrays


def _row_inputs(instances, dtypes, check, plain_numbers=False):
    """FillTensorMapFromInstancesList."""
    if not isinstance(instances[0], dict) and len(dtypes) > 1:
        raise errors.invalid_argument(
            "instances is a plain list, but expecting list of objects as "
            "multiple input tensors required as per tensorinfo_map"
        )
    objects, names, batch = _is_element_object(instances[0]), sorted(dtypes), _Batch(dtypes)
    # The first row fixes each input's shape (later rows must match it), so the row count and
    # the first row's nesting are the whole request's claim: checked before anything is read.
    first = instances[0].items() if objects else [(names[0], instances[0])]
    for name, value in first:
        if name in dtypes:
            check(name, [len(instances)] + dense_shape(value))
    arrays = _fast_rows(instances, dtypes, names, objects, plain_numbers)
    if arrays is not None:
        return arrays
    for row, element in enumerate(instances):
        if objects:
            if not _is_element_object(element):
                raise errors.invalid_argument(
                    f"Expecting object but got list at item {row} of input list"
                )
            for name, value in element.items():
                try:
                    batch.add(name, value)
                except errors.ServingError as e:
                    raise errors.invalid_argument(
                        f"Failed to process element: {row} key: {name} of "
                        f"'instances' list. Error: {e}"
                    ) from None
            if set(element) != set(names):
                raise errors.invalid_argument(
                    f"Failed to process element: {row} of 'instances' list. JSON object: "
                    f"{value_to_string(element)} keys must be equal to: {','.join(names)}"
                )
        else:
            if _is_element_object(element):
                raise errors.invalid_argument(
                    f"Expecting value/list but got object at item {row} of input list"
                )
            try:
                batch.add(names[0], element)
            except errors.ServingError as e:
                raise errors.invalid_argument(
                    f"Failed to process element: {row} of 'instances' list. Error: {e}"
                ) from None
    return batch.arrays(len(instances))


def _columnar_inputs(value, dtypes, check, plain_numbers=False):
    """FillTensorMapFromInputsMap: keys that are not inputs are ignored, as in TF Serving."""
    if not isinstance(value, dict) or is_b64_object(value):
        if len(dtypes) > 1:
            raise errors.invalid_argument(
                "inputs is a plain value/list, but expecting an object as "
                "multiple input tensors required as per tensorinfo_map"
            )
        ((name, dtype),) = dtypes.items()
        return {
            name: value_to_array(value, dtype, lambda shape: check(name, shape), plain_numbers)[0]
        }
    arrays = {}
    for name in sorted(dtypes):
        if name not in value:
            raise errors.invalid_argument(f"Missing named input: {name} in 'inputs' object.")
        arrays[name] = value_to_array(
            value[name], dtypes[name], lambda shape, name=name: check(name, shape), plain_numbers
        )[0]
    return arrays


# ------------------------------------------------------------------ classify / regress requests
def _feature_kind_error(name, feature):
    kind = {"bytes_list": "bytes", "float_list": "float", "int64_list": "int64"}.get(
        feature.WhichOneof("kind"), "UNKNOWN"
    )
    return errors.invalid_argument(
        f"Unexpected element type in feature: {name} expecting type: {kind}"
    )


def _add_to_feature(value, name, feature):
    """AddValueToFeature: the first value fixes the feature's kind; bools are int64 0/1."""
    kind = feature.WhichOneof("kind")

    def check(want):
        if kind not in (None, want):
            raise _feature_kind_error(name, feature)

    if (
        value is None
        or isinstance(value, list)
        or (isinstance(value, dict) and not is_b64_object(value))
    ):
        raise errors.invalid_argument(
            f"Feature: {name} has element with unexpected JSON type: {json_type(value)}"
        )
    if isinstance(value, bool):
        check("int64_list")
        feature.int64_list.value.append(int(value))
    elif isinstance(value, (dict, str)):
        check("bytes_list")
        feature.bytes_list.value.append(
            decode_b64_object(value)
            if isinstance(value, dict)
            else value.encode("utf-8", "surrogatepass")
        )
    elif isinstance(value, float):
        check("float_list")
        if not _is_lossless(value, dt.float32):
            raise errors.invalid_argument(
                f"Cannot convert JSON value: {value_to_string(value)} to float "
                "without loss of precision."
            )
        feature.float_list.value.append(value)
    else:
        check("int64_list")
        if value >= 2**63:
            raise errors.invalid_argument(
                f"Feature: {name} has uint64 element. Only int64 is supported."
            )
        feature.int64_list.value.append(value)


def make_example(value, example):
    """MakeExampleFromJsonObject: {feature: value or [values]} -> tf.train.Example (filled in place)."""
    if not isinstance(value, dict):
        raise errors.invalid_argument(
            f"Example must be JSON object but got JSON {json_type(value)}"
        )
    for name, content in value.items():
        feature = feature_pb2.Feature()
        values = content if isinstance(content, list) else [content]
        if not _add_all_to_feature(values, feature):
            for item in values:
                _add_to_feature(item, name, feature)
        example.features.feature[name].CopyFrom(feature)
    return example


def _add_all_to_feature(values, feature) -> bool:
    """The plain case of a feature's values added as one list (a C loop, not a Python call per
    value): all strings, all integers below 2**63, or all floats that float32 holds. False, with
    `feature` untouched, for anything else, which `_add_to_feature` adds or words the error of,
    value by value."""
    kinds = set(map(type, values))
    if kinds == {str}:
        feature.bytes_list.value.extend([v.encode("utf-8", "surrogatepass") for v in values])
    elif kinds == {int}:
        if max(values) >= 2**63:
            return False
        feature.int64_list.value.extend(values)
    elif kinds == {float}:
        array = np.array(values, np.float64)
        finite = array[np.isfinite(array)]
        if finite.size and np.abs(finite).max() > float(np.finfo(np.float32).max):
            return False
        feature.float_list.value.extend(values)
    else:
        return False
    return True


def _nonempty_array(doc, key, not_array, empty):
    """`doc[key]`, which must be a non-empty JSON array ("instances", "examples").

    Raises:
        ServingError INVALID_ARGUMENT: "JSON Value: <doc> " and then `not_array` or `empty`, TF
            Serving's own wording for that key (it differs between them, typos included).
    """
    value = doc[key]
    if not isinstance(value, list):
        raise errors.invalid_argument(f"JSON Value: {value_to_string(doc)} {not_array}")
    if not value:
        raise errors.invalid_argument(f"JSON Value: {value_to_string(doc)} {empty}")
    return value


def fill_examples(doc, input_proto, verb="classify", check_count=None):
    """FillClassify/RegressRequestFromJson: "context" (optional) and "examples" into an Input
    proto. `check_count(n)`, when given, sees the number of examples before any is read, and
    raises to refuse it (`serving.wire.tensors.check_batch_size`)."""
    has_context = "context" in doc
    if has_context:
        make_example(doc["context"], input_proto.example_list_with_context.context)
    if "examples" not in doc:
        raise errors.invalid_argument(
            f"JSON Value: {value_to_string(doc)} When method is {verb}, key "
            "'examples' is expected and was not found"
        )
    examples = _nonempty_array(
        doc,
        "examples",
        "Expecting 'examples' value to be an list/array",
        "'examples' value is an empty array",
    )
    if check_count is not None:
        check_count(len(examples))
    target = (
        input_proto.example_list_with_context.examples
        if has_context
        else input_proto.example_list.examples
    )
    for value in examples:
        make_example(value, target.add())
    return input_proto
