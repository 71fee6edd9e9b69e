"""TensorProto <-> numpy and request validation against a signature's TensorSpecs.

Documented rules (what clients can rely on):
- dtypes must match the signature, except integer ids: int64 sent to an int32 input (and int32 to
  int64) is cast, with INVALID_ARGUMENT naming the tensor if a value does not fit int32.
- shapes must match the signature's rank and known dimensions; the batch dimension (dim 0) must be
  the same for all inputs (e.g. `text` and `text_b`) and non-zero ("empty batch"). Inputs of unknown
  rank are passed as they are (the model decides, as in TF Serving).
- sizes are checked before they cost anything: a TensorProto's declared shape (its number of
  dimensions, each dimension, the batch, their product) is checked against the signature and the
  limits, then its content is counted against that shape, and only then is anything allocated or
  read element by element (`read_inputs`); REST bodies go through the same `check_shape` before
  their JSON is converted. A request may declare at most `max_elements` elements per input.
- string inputs named in `Limits.text_inputs` (default `text`, `text_b`) are text: each element must
  be valid UTF-8 and at most `max_text_length` bytes. Other string inputs (e.g. serialized
  tf.Example) are passed through untouched.
Every violation is INVALID_ARGUMENT with a message naming the input; never INTERNAL.
"""

import dataclasses
import math
import sys

import numpy as np

from serving.wire import dtypes, errors, tensor_protos

DEFAULT_TEXT_INPUTS = ("text", "text_b")


@dataclasses.dataclass(frozen=True)
class Limits:
    """Per-request limits. max_batch_size: rows (0 = none); max_text_length: UTF-8 bytes per text
    element (0 = none); text_inputs: names of string inputs checked as text; max_elements: most
    elements one input may declare (the product of its dimensions; 0 = none)."""

    max_batch_size: int = 0
    max_text_length: int = 0
    text_inputs: tuple = DEFAULT_TEXT_INPUTS
    max_elements: int = tensor_protos.MAX_FILLED


def _shape_text(shape):
    return ["?" if d < 0 else d for d in shape]


def check_shape(signature, alias: str, shape, limits: Limits):
    """One rule for every shape a request declares, checked before any allocation or per-element
    work: a TensorProto's `tensor_shape` (`read_inputs`), a REST body's JSON nesting
    (`serving.wire.json_tensor`) and a converted array's shape (`check_inputs`).

    Args:
        signature: servable.Signature. alias: the input's name (one of `signature.inputs`).
        shape: sequence of int, as declared (a TensorProto's dims may be any int64).
        limits: Limits.
    Returns:
        The batch size (dim 0) when the signature gives the input a rank of at least 1, else None.
    Raises:
        ServingError INVALID_ARGUMENT: more dimensions than the signature's rank (or than
            MAX_RANK where its rank is unknown), a negative dimension, a known dimension that
            differs, an empty batch, a batch over `max_batch_size`, or more than `max_elements`
            elements.
    """
    spec = signature.inputs[alias]
    rank = len(shape)
    check_rank(signature, alias, rank)
    if spec.shape is not None and (
        rank != len(spec.shape) or any(d >= 0 and d != n for d, n in zip(spec.shape, shape))
    ):
        raise errors.invalid_argument(
            f"input '{alias}' has shape {list(shape)} but signature '{signature.key}' "
            f"expects {_shape_text(spec.shape)}"
        )
    if any(n < 0 for n in shape):
        raise errors.invalid_argument(
            f"input '{alias}' has shape {list(shape)}: dimensions cannot be negative"
        )
    batch = None
    if rank >= 1 and spec.shape is not None:  # unknown rank: no batch dimension assumed
        batch = shape[0]
        if batch == 0:
            raise errors.invalid_argument(f"empty batch: input '{alias}' has batch size 0")
        check_batch_size(batch, limits)
    elements = math.prod(shape)
    if limits.max_elements and elements > limits.max_elements:
        raise errors.invalid_argument(
            f"input '{alias}' has shape {list(shape)}, {elements} elements; the limit is "
            f"{limits.max_elements} elements per input (--max_request_elements)"
        )
    return batch


def check_rank(signature, alias: str, rank: int):
    """A declared number of dimensions past MAX_RANK is refused before the dimensions are read:
    INVALID_ARGUMENT naming the signature's rank where it has one."""
    if rank <= tensor_protos.MAX_RANK:
        return
    spec = signature.inputs[alias]
    expected = (
        f"signature '{signature.key}' expects {_shape_text(spec.shape)}"
        if spec.shape is not None
        else f"at most {tensor_protos.MAX_RANK} are accepted"
    )
    raise errors.invalid_argument(f"input '{alias}' has {rank} dimensions; {expected}")


def check_batch_size(batch: int, limits: Limits):
    """INVALID_ARGUMENT when `batch` rows exceed `limits.max_batch_size` (one rule and one text
    for every API: tensors, tf.Examples, REST rows)."""
    if limits.max_batch_size and batch > limits.max_batch_size:
        raise errors.invalid_argument(
            f"batch size {batch} exceeds the limit of {limits.max_batch_size} rows "
            "per request (--max_request_batch_size)"
        )


def check_names(signature, names):
    """The request's input names must be exactly the signature's (INVALID_ARGUMENT otherwise)."""
    want, have = set(signature.inputs), set(names)
    if want != have:
        raise errors.invalid_argument(
            f"input size does not match signature '{signature.key}': got {sorted(have)}, expected "
            f"{sorted(want)}. Missing but required: {sorted(want - have)}. Sent extra: "
            f"{sorted(have - want)}"
        )


def check_batches(batches: dict):
    """All inputs with a batch dimension must agree on it (INVALID_ARGUMENT otherwise).
    `batches`: alias -> batch size (None: no batch dimension)."""
    sizes = {k: v for k, v in batches.items() if v is not None}
    if len(set(sizes.values())) > 1:
        raise errors.invalid_argument(
            "inputs have different batch sizes (dim 0): "
            + ", ".join(f"{k}={v}" for k, v in sorted(sizes.items()))
        )


def read_inputs(signature, protos, limits: Limits = Limits()) -> dict:
    """A request's TensorProtos -> validated numpy inputs (`check_inputs`), every declared size
    checked before anything is allocated: the names, then each proto's declared shape
    (`check_shape`, from the count of its dimensions up), the batch across inputs, then the
    content against the shape (`to_numpy`), and only then the values.

    Args:
        signature: servable.Signature. protos: mapping alias -> TensorProto. limits: Limits.
    Returns:
        dict alias -> np.ndarray with the signature's dtypes.
    Raises:
        ServingError INVALID_ARGUMENT naming the input and the problem.
    """
    check_names(signature, protos)
    batches = {}
    for alias in sorted(protos):
        proto = protos[alias]
        if proto.tensor_shape.unknown_rank:  # a value needs its shape, whatever the signature
            spec = signature.inputs[alias]
            raise errors.invalid_argument(
                f"input '{alias}' has unknown rank but "
                + (
                    f"signature '{signature.key}' expects {_shape_text(spec.shape)}"
                    if spec.shape is not None
                    else "a tensor sent must give its shape"
                )
            )
        dims = proto.tensor_shape.dim
        check_rank(signature, alias, len(dims))  # before the dimensions are read
        batches[alias] = check_shape(signature, alias, [d.size for d in dims], limits)
    check_batches(batches)
    arrays = {alias: to_numpy(protos[alias], alias, limits) for alias in sorted(protos)}
    return check_inputs(signature, arrays, limits)


def to_numpy(proto, alias: str, limits: Limits = Limits()) -> np.ndarray:
    """TensorProto -> numpy (strings as an object array of bytes).

    Read by `tensor_protos` (what tf.make_ndarray reads, without TensorFlow; raw `tensor_content`
    about 4x faster than tf.make_ndarray for the small tensors of a batch-1 request). A dtype it
    does not hold (bfloat16, complex) is read by tf.make_ndarray when this process has loaded
    TensorFlow (it serves a SavedModel), and refused otherwise: no LiteRT input takes one.

    Raises:
        ServingError INVALID_ARGUMENT naming `alias` when the proto is malformed (for example
        `tensor_content` of the wrong size for its shape).
    """
    array = tensor_protos.raw_to_numpy(proto)
    if array is not None:
        return array
    tf = _loaded_tensorflow()
    try:
        if tf is not None and proto.dtype not in _OWN_DTYPES:
            _check_tensorflow_content(proto, limits)
            return tf.make_ndarray(proto)
        return tensor_protos.to_numpy(proto, limits.max_elements or sys.maxsize)
    except Exception as e:
        raise errors.invalid_argument(f"input '{alias}' is not a valid TensorProto: {e}") from e


def _check_tensorflow_content(proto, limits):
    """Before tf.make_ndarray reads a dtype `tensor_protos` does not hold (bfloat16, complex):
    the declared element count within `limits.max_elements`, so its compact form cannot size an
    allocation past it, and a known rank (tf.make_ndarray reads the dimensions of a proto flagged
    unknown rank, unchecked: 64 bytes declaring 2**33 bfloat16 grew a server past its memory).
    ValueError otherwise."""
    if proto.tensor_shape.unknown_rank:
        raise ValueError("a TensorProto of unknown rank has no numpy value")
    elements = math.prod(tensor_protos.dimensions(proto))
    bound = limits.max_elements or sys.maxsize
    if elements > bound:
        raise ValueError(f"it declares {elements} elements; at most {bound} are read")


# What `tensor_protos` reads and writes itself (numeric raw dtypes and strings).
_OWN_DTYPES = frozenset(tensor_protos.RAW_DTYPES) | {dtypes.string.as_datatype_enum}


def _loaded_tensorflow():
    """The `tensorflow` module if this process has imported it (never imports it)."""
    tf = sys.modules.get("tensorflow")
    return tf if hasattr(tf, "make_ndarray") else None


def to_proto(array):
    """numpy (or anything np.asarray takes) -> TensorProto, equal to tf.make_tensor_proto's:
    `tensor_protos.to_proto`, or tf.make_tensor_proto for the dtypes it does not write (bfloat16,
    complex: only a SavedModel's outputs, with TensorFlow loaded)."""
    array = np.asarray(array)
    proto = tensor_protos.raw_to_proto(array)
    if proto is not None:
        return proto
    tf = _loaded_tensorflow()
    try:
        return tensor_protos.to_proto(array)
    except ValueError:
        if tf is None:
            raise
        return tf.make_tensor_proto(array)


def _dtype_name(array):
    """The dtype's TensorFlow name for a message; numpy's where TensorFlow has none for it
    (tf.make_ndarray reads a quantized proto into a structured dtype, e.g. qint16)."""
    if array.dtype == object or array.dtype.kind in "SU":
        return "string"
    try:
        return dtypes.as_dtype(array.dtype).name
    except TypeError:
        return f"numpy {array.dtype}"


def cast(alias, array, spec):
    want = spec.dtype
    if want == dtypes.string:
        if array.dtype == object and all(isinstance(x, bytes) for x in array.flat):
            return array
        if array.dtype.kind in "SU":
            return (
                np.vectorize(
                    lambda s: s.encode("utf-8") if isinstance(s, str) else s, otypes=[object]
                )(array)
                if array.size
                else array.astype(object)
            )
        raise errors.invalid_argument(
            f"input '{alias}' expects dtype string but got {_dtype_name(array)}"
        )
    # The common case, the dtype the signature takes (None: no array has it; and numpy reads a
    # comparison with None as one with float64).
    if want.numpy_dtype is not None and array.dtype == want.numpy_dtype:
        return array
    if array.dtype == object or array.dtype.kind in "SU":
        raise errors.invalid_argument(f"input '{alias}' expects dtype {want.name} but got string")
    try:
        have = dtypes.as_dtype(array.dtype)
    except TypeError:
        raise errors.invalid_argument(
            f"input '{alias}' expects dtype {want.name} but got {_dtype_name(array)}"
        ) from None
    if have == want:
        return array
    if have in (dtypes.int32, dtypes.int64) and want in (dtypes.int32, dtypes.int64):
        info = np.iinfo(want.as_numpy_dtype)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise errors.invalid_argument(
                f"input '{alias}' has values outside the {want.name} range; cannot cast {have.name} "
                f"to {want.name}"
            )
        return array.astype(want.as_numpy_dtype)
    raise errors.invalid_argument(f"input '{alias}' expects dtype {want.name} but got {have.name}")


def check_inputs(signature, arrays: dict, limits: Limits = Limits()) -> dict:
    """Validates and casts request inputs for `signature`.

    Args:
        signature: servable.Signature. arrays: dict alias -> np.ndarray. limits: Limits.
    Returns:
        dict alias -> np.ndarray with the signature's dtypes.
    Raises:
        ServingError INVALID_ARGUMENT naming the problem (missing/extra input, dtype, shape, empty
        or mismatched batch, batch over the limit, non-UTF-8 or over-long text).
    """
    check_names(signature, arrays)
    out, batches = {}, {}
    for alias in sorted(arrays):
        spec, array = signature.inputs[alias], np.asarray(arrays[alias])
        batches[alias] = check_shape(signature, alias, array.shape, limits)
        array = cast(alias, array, spec)
        if spec.dtype == dtypes.string and alias in limits.text_inputs:
            for i, value in enumerate(array.flat):
                _check_text(value, f"input '{alias}' element {i}", limits)
        out[alias] = array
    check_batches(batches)
    return out


def check_text_feature(name: str, value: bytes, limits: Limits, row: int):
    """UTF-8 / length rule for a text feature inside a tf.Example (Classify/Regress)."""
    _check_text(value, f"example {row} feature '{name}'", limits)


def _check_text(value: bytes, where: str, limits: Limits):
    """One rule for every text input: valid UTF-8, at most --max_text_length bytes.

    Raises:
        ServingError INVALID_ARGUMENT naming `where` (e.g. "input 'text' element 3").
    """
    try:
        value.decode("utf-8")
    except UnicodeDecodeError as e:
        raise errors.invalid_argument(
            f"{where} is not valid UTF-8 text ({e.reason} at byte {e.start}); send text as UTF-8"
        ) from None
    if limits.max_text_length and len(value) > limits.max_text_length:
        raise errors.invalid_argument(
            f"{where} is {len(value)} bytes long; the limit is {limits.max_text_length} bytes "
            "(--max_text_length)"
        )
