"""Response JSON as TensorFlow Serving writes it (tensorflow_serving/util/json_tensor.cc: WriteDecimal,
MakeJsonFromTensors, MakeJsonFromClassificationResult, MakeJsonFromRegressionResult).

Numbers: integers and bools as JSON; float32/float64 through `decimal()` (six significant digits
when they round-trip, else full precision; `.0` on whole numbers; NaN, Infinity, -Infinity as bare
tokens, which Python's `json` and rapidjson with kParseNanAndInfFlag read). Strings: UTF-8 text; an
output whose name ends in `_bytes`, and (our deliberate addition) any string that is not valid UTF-8,
as {"b64": "<standard base64 with padding>"}.
"""

import base64
import json
import math

import numpy as np

from serving.wire import errors


def decimal(value, float32: bool) -> str:
    """WriteDecimal<float|double>: the JSON number text of one float."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "-Infinity" if value < 0 else "Infinity"
    text = "%g" % value  # absl::StrCat: six significant digits
    back = float(np.float32(float(text))) if float32 else float(text)
    if back != value:
        text = ("%.9g" if float32 else "%.17g") % value
    if "." not in text and "e" not in text:
        text += ".0"
    return text


def _string(value: bytes, as_bytes: bool) -> str:
    if not as_bytes:
        try:
            return json.dumps(value.decode("utf-8"), ensure_ascii=False)
        except UnicodeDecodeError:
            pass
    return '{"b64": "' + base64.b64encode(value).decode("ascii") + '"}'


def _scalar_writer(array: np.ndarray, name: str):
    """A function numpy scalar -> JSON text for `array`'s dtype (AddSingleValueAndAdvance)."""
    kind = array.dtype.kind
    if array.dtype == object or kind == "S":
        as_bytes = name.endswith("_bytes")
        return lambda v: _string(v if isinstance(v, bytes) else str(v).encode("utf-8"), as_bytes)
    if kind == "f" and array.dtype.itemsize in (4, 8):
        float32 = array.dtype.itemsize == 4
        return lambda v: decimal(v, float32)
    if kind == "b":
        return lambda v: "true" if v else "false"
    if kind in "iu":
        return lambda v: str(int(v))
    raise errors.invalid_argument(f"Failed to write JSON value for tensor type: {array.dtype.name}")


def tensor_json(array: np.ndarray, name: str) -> str:
    """AddTensorValues from dimension 0: nested JSON lists (a bare value for a scalar)."""
    array = np.asarray(array)
    write = _scalar_writer(array, name)
    if array.ndim == 0:
        return write(array.item() if array.dtype != object else array[()])

    def nest(a):
        if a.ndim == 1:
            return "[" + ",".join(write(v) for v in a) + "]"
        return "[" + ",".join(nest(sub) for sub in a) + "]"

    return nest(array)


def _key(name):
    return json.dumps(name, ensure_ascii=False)


def predict_json(outputs: dict, row: bool) -> str:
    """MakeJsonFromTensors: {"predictions": [...]} (row) or {"outputs": ...} (columnar).

    Args: outputs: dict output name -> numpy array; row: the request used "instances".
    Raises: ServingError INVALID_ARGUMENT (row format: an output without a batch dimension, or
        outputs with different batch sizes; a dtype JSON cannot carry). A batch of 0 (no
        detections, say) is {"predictions": []}, as TF Serving since PR #1635.
    """
    if not outputs:
        raise errors.invalid_argument("Cannot convert empty tensor map to JSON")
    names = sorted(outputs)
    if not row:
        if len(names) == 1:
            return '{"outputs": ' + tensor_json(outputs[names[0]], names[0]) + "}"
        return (
            '{"outputs": {'
            + ", ".join(f"{_key(n)}: {tensor_json(outputs[n], n)}" for n in names)
            + "}}"
        )
    batch = None
    for name in names:
        shape = np.shape(outputs[name])
        if not shape:
            raise errors.invalid_argument(f"Tensor name: {name} has no shape information ")
        if batch is not None and shape[0] != batch:
            raise errors.invalid_argument(
                f"Tensor name: {name} has inconsistent batch size: {shape[0]} expecting: {batch}"
            )
        batch = shape[0]
    columns = {n: [tensor_json(item, n) for item in np.asarray(outputs[n])] for n in names}
    if len(names) == 1:
        rows = columns[names[0]]
    else:
        rows = [
            "{" + ", ".join(f"{_key(n)}: {columns[n][i]}" for n in names) + "}"
            for i in range(batch)
        ]
    return '{"predictions": [' + ", ".join(rows) + "]}"


def classification_json(result) -> str:
    """MakeJsonFromClassificationResult: {"results": [[[label, score], ...], ...]}."""
    if not result.classifications:
        raise errors.invalid_argument("Cannot convert empty ClassificationResults to JSON")
    rows = [
        "["
        + ", ".join(
            f"[{json.dumps(c.label, ensure_ascii=False)}, {decimal(c.score, True)}]"
            for c in row.classes
        )
        + "]"
        for row in result.classifications
    ]
    return '{"results": [' + ", ".join(rows) + "]}"


def regression_json(result) -> str:
    """MakeJsonFromRegressionResult: {"results": [value, ...]}."""
    if not result.regressions:
        raise errors.invalid_argument("Cannot convert empty RegressionResults to JSON")
    return '{"results": [' + ", ".join(decimal(r.value, True) for r in result.regressions) + "]}"
