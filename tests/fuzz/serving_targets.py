"""Fuzz targets for every input surface of the server: `target(data: bytes)`, each raising on a
finding and returning on anything else.

A finding is:
- an exception other than `serving.wire.errors.ServingError` with a code other than INTERNAL (an
  INTERNAL or 5xx answer is one too: the server blamed itself for a request);
- more than `CPU_LIMIT_S` seconds of this process's CPU on one input (CPU, not wall-clock time,
  so a loaded machine does not raise false findings; with the cyclic garbage collector paused, so
  a full collection of what earlier tests left in the process is not charged to the input);
- a wrong answer to a property: the whole-array JSON conversion disagreeing with TF Serving's
  element-by-element one; an input converted to another shape than the one its declared size was
  checked as; a TensorProto read differently from `tf.make_ndarray`; a refused request whose
  handling allocated more than `REFUSED_ALLOCATION_BYTES` beyond its own size.

Targets (`TARGETS`), and what their bytes are:
    rest_json        a REST body: json_tensor.parse_json, then predict_inputs for several
                     signatures and fill_examples for classify and regress, no model.
    rest_http        the raw bytes of HTTP/1.1 requests on one connection (request line,
                     headers, framing, body, several requests kept alive): the REST port's HTTP
                     server (Tornado and our exchange) on loopback over the in-process server
                     (`tests.fuzz.servables`).
    grpc_predict, grpc_classify, grpc_regress, grpc_multi_inference, grpc_model_metadata,
    grpc_model_status
                     the wire bytes of that request proto (FromString), through the
                     InferenceService method the gRPC servicer calls.
    grpc_tensor_protos
                     structure-aware: the bytes choose a signature and build each input's
                     TensorProto (any dtype, unknown rank, hostile dimensions, tensor_content or
                     any value field, half and string types) for a Predict request.

Run them coverage-guided with `python -m tests.fuzz.run <target>`; tests/fuzz/test_serving_targets.py
replays the saved corpus (tests/fuzz/corpus/<target>/) and drives them with hypothesis.
"""

import contextlib
import gc
import http.client
import io
import json
import logging
import math
import re
import socket
import time
import tracemalloc

import grpc
import numpy as np
from google.protobuf import message
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    predict_pb2,
    regression_pb2,
)

from serving.wire import dtypes as dt, errors, json_tensor, tensor_protos, tensors
from serving.models.servable import Signature, TensorSpec
from tests.fuzz import servables
from tests.fuzz.byte_source import ByteSource

CPU_LIMIT_S = 1.0
REFUSED_ALLOCATION_BYTES = 1 << 20


class Finding(AssertionError):
    """A property of the server does not hold for this input."""


def refused_well(error: Exception):
    """Returns when `error` is the documented refusal (a ServingError that is not INTERNAL);
    raises Finding otherwise."""
    if isinstance(error, errors.ServingError) and error.code not in (
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DATA_LOSS,
    ):
        return
    raise Finding(f"not a documented refusal: {type(error).__name__}: {error}") from error


@contextlib.contextmanager
def collector_paused():
    """Pauses Python's cyclic garbage collector inside the block (and turns it back on after, if
    it was on). A full collection walks every object of the process: in a test worker, every
    earlier test's models, over a second of CPU. That is the cost of what ran before, not of the
    input that happened to allocate the object that triggered it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def timed(fn, server=False):
    """`fn` as a target that also fails an input costing more than CPU_LIMIT_S of CPU (with
    `server`, the in-process server is built first, outside the time of any input). The input
    runs with the cyclic collector paused (`collector_paused`); its own garbage is collected after."""

    def target(data: bytes):
        if server:
            servables.server()
        with collector_paused():
            start = time.process_time()
            fn(data)
            spent = time.process_time() - start
        if spent > CPU_LIMIT_S:
            raise Finding(f"{spent:.2f} s of CPU on one input of {len(data)} bytes")

    target.__name__, target.__doc__ = fn.__name__, fn.__doc__
    return target


# ------------------------------------------------------------------ REST JSON, no model
def _signature(key, **inputs):
    return Signature(
        key,
        "tensorflow/serving/predict",
        {a: TensorSpec(a, *s) for a, s in inputs.items()},
        {},
        None,
    )


_IDS = (dt.int32, [-1, -1])
JSON_SIGNATURES = [
    _signature("text", text=(dt.string, [-1])),
    _signature("pair", text=(dt.string, [-1]), text_b=(dt.string, [-1])),
    _signature("ids", input_word_ids=_IDS, input_mask=_IDS, input_type_ids=_IDS),
    _signature("swag", text=(dt.string, [-1]), choices=(dt.string, [-1, 4])),
    _signature("float", x=(dt.float32, [-1])),
    *[
        _signature(f"any_{d.name}", default=(d, None))
        for d in (dt.int32, dt.int64, dt.uint64, dt.float32, dt.float64, dt.string, dt.bool_)
    ],
    _signature("any_int8", default=(dt.int8, None)),
    _signature("mixed", a=(dt.int32, None), b=(dt.string, [-1]), c=(dt.float64, [-1, 2])),
]


class _Fallback:
    """Within the block, the whole-array conversion declines everything, so the
    element-by-element port of json_tensor.cc converts the request alone."""

    def __enter__(self):
        self.saved = json_tensor._fast_array
        json_tensor._fast_array = lambda *args, **kwargs: None

    def __exit__(self, *exc):
        json_tensor._fast_array = self.saved


def _convert(doc, signature, plain_numbers):
    """(arrays or the ServingError, {alias: shapes the check saw})."""
    checked = {}

    def check(alias, shape):
        checked.setdefault(alias, []).append(list(shape))
        tensors.check_shape(signature, alias, shape, servables.LIMITS)

    dtypes = {alias: spec.dtype for alias, spec in signature.inputs.items()}
    try:
        arrays, _ = json_tensor.predict_inputs(doc, dtypes, check, plain_numbers)
    except Exception as e:
        refused_well(e)
        return e, checked
    return arrays, checked


def _same_arrays(fast, slow, where):
    if isinstance(fast, Exception) or isinstance(slow, Exception):
        if type(fast) is not type(slow) or str(fast) != str(slow):
            raise Finding(f"{where}: whole-array path {fast!r} but element path {slow!r}")
        return
    if fast.keys() != slow.keys():
        raise Finding(f"{where}: inputs {sorted(fast)} against {sorted(slow)}")
    for name in fast:
        a, b = fast[name], slow[name]
        if a.dtype != b.dtype or a.shape != b.shape:
            raise Finding(f"{where} '{name}': {a.dtype}{a.shape} against {b.dtype}{b.shape}")
        if a.dtype.kind == "f":
            equal = np.array_equal(a, b, equal_nan=True)
        else:
            equal = a.tolist() == b.tolist()
        if not equal:
            raise Finding(f"{where} '{name}': values differ between the two paths")


def _check_declared(arrays, checked, where):
    """Every converted input was checked, as the shape it came out with, before conversion."""
    for name, array in arrays.items():
        if list(array.shape) not in checked.get(name, []):
            raise Finding(
                f"{where} '{name}': converted to {list(array.shape)} but checked as "
                f"{checked.get(name)}"
            )


@timed
def rest_json(data: bytes):
    """A REST request body through the JSON layer, for every signature of JSON_SIGNATURES and
    for classify / regress."""
    try:
        doc = json_tensor.parse_json(data)
        json_tensor.signature_name(doc)
    except Exception as e:
        refused_well(e)
        return
    plain = json_tensor.holds_no_booleans(data)
    for signature in JSON_SIGNATURES:
        fast, checked = _convert(doc, signature, plain)
        with _Fallback():
            slow, _ = _convert(doc, signature, False)
        _same_arrays(fast, slow, f"signature '{signature.key}'")
        if not isinstance(fast, Exception):
            _check_declared(fast, checked, f"signature '{signature.key}'")
    for verb, request in (
        ("classify", classification_pb2.ClassificationRequest()),
        ("regress", regression_pb2.RegressionRequest()),
    ):
        counted = []

        def count(n):
            counted.append(n)
            tensors.check_batch_size(n, servables.LIMITS)

        try:
            json_tensor.fill_examples(doc, request.input, verb, count)
        except Exception as e:
            refused_well(e)
            continue
        if [len(doc["examples"])] != counted or counted[0] != _example_count(request.input):
            raise Finding(
                f"{verb}: {counted} examples counted, {_example_count(request.input)} read"
            )


def _example_count(input_proto):
    kind = input_proto.WhichOneof("kind")
    return len(getattr(input_proto, kind).examples) if kind else 0


# ------------------------------------------------------------------ REST port, raw bytes
_METHODS = ("GET", "POST", "PUT", "DELETE", "HEAD")
# A connection the port neither answers nor closes within this long is a finding (a request
# declared past what was sent ends at the client's end of stream, not at a deadline).
REST_WAIT_S = 10.0
_DOCUMENTED_5XX = {501, 503}


def raw_request(method: str, path: str, body: bytes = b"", headers=()) -> bytes:
    """The bytes of one HTTP/1.1 request: `method path`, Host, Content-Length for a body (and for
    every POST), the extra `headers` (name, value) in order, then the body."""
    lines = [f"{method} {path} HTTP/1.1", "Host: fuzz"]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _ErrorLog(logging.Handler):
    """Records what Tornado logs as an error (an uncaught exception in a request's handling)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


_TORNADO_ERRORS = _ErrorLog()
logging.getLogger("tornado.application").addHandler(_TORNADO_ERRORS)


class ReplyBytes(io.BytesIO):
    """Bytes read as a socket's file; `HTTPResponse` closing it after a body leaves it open."""

    def makefile(self, *args, **kwargs):
        return self

    def close(self):
        pass


def until_closed(sock) -> bytes:
    """Every byte the port sends on `sock` until it closes the connection (a reset ends it
    too)."""
    reply = []
    try:
        while chunk := sock.recv(1 << 16):
            reply.append(chunk)
    except ConnectionResetError:
        pass
    return b"".join(reply)


def _exchange(data: bytes, method: str, answered: bool) -> bytes:
    """Sends `data` on a new connection to the in-process REST port and returns every byte the
    port sends until it closes; with `answered`, the end of the stream is sent only once a first
    final answer is whole (Tornado closes a half-closed connection, dropping answers still being
    computed)."""
    with socket.create_connection(("127.0.0.1", servables.server().rest_port), REST_WAIT_S) as sock:
        reply = []
        try:
            sock.sendall(data)
            while answered and _first_answer(b"".join(reply), method) is None:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                reply.append(chunk)
            sock.shutdown(socket.SHUT_WR)
        except socket.timeout:
            raise Finding(
                f"no whole answer within {REST_WAIT_S:g} s of a whole request: "
                f"{b''.join(reply)[:300]!r}"
            ) from None
        except OSError:  # the port answered and closed before taking it all
            pass
        try:
            while chunk := sock.recv(1 << 16):
                reply.append(chunk)
        except ConnectionResetError:  # closed with bytes of ours unread: what came is kept
            pass
        except socket.timeout:
            raise Finding(f"no close within {REST_WAIT_S:g} s of the end of the stream") from None
    return b"".join(reply)


def _first_answer(reply: bytes, method: str):
    """(the first final answer, its body, the bytes after it) once `reply` holds it whole, else
    None; interim 1xx answers are skipped."""
    final = re.sub(rb"^(HTTP/1\.1 1\d\d [^\r\n]*\r\n\r\n)+", b"", reply)
    if b"\r\n\r\n" not in final:
        return None
    stream = ReplyBytes(final)
    response = http.client.HTTPResponse(stream, method=method)
    try:
        response.begin()
        body = response.read()
    except (http.client.IncompleteRead, http.client.RemoteDisconnected):
        return None
    except (http.client.HTTPException, ValueError) as e:
        raise Finding(f"not an HTTP/1.1 response: {e!r}: {reply[:300]!r}") from None
    return response, body, stream.read()


def _whole_first_request(data: bytes) -> bool:
    """Whether `data` starts with a whole request the port must answer: a header within the
    port's header limit, and all of the body its Content-Length declares (a length that is not
    one, or none, must be refused, which is an answer too); a chunked one is not judged."""
    header, blank, rest = data.partition(b"\r\n\r\n")
    if not blank or len(header) >= rest_options().max_header_bytes:
        return False
    fields = {}
    for line in header.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon:
            fields.setdefault(name.strip().lower(), value.strip())
    if b"transfer-encoding" in fields:
        return False
    length = fields.get(b"content-length")
    return length is None or not re.fullmatch(rb"[0-9]+", length) or len(rest) >= int(length)


def rest_options():
    from serving.protocol import rest

    return rest.RestOptions()


def rest_http(data: bytes):
    """The raw bytes of one or more HTTP/1.1 requests (request line, headers, framing, body) on
    one connection to the REST port's HTTP server: a whole first request gets a whole HTTP/1.1
    answer; no answer is 5xx but 501 / 503; an error is always a JSON {"error": str} with a
    Content-Length that counts it; nothing is logged as an uncaught exception."""
    del _TORNADO_ERRORS.records[:]
    method = data.split(b" ", 1)[0].decode("latin-1")
    whole = _whole_first_request(data)
    reply = _exchange(data, method, whole)
    if _TORNADO_ERRORS.records:
        record = _TORNADO_ERRORS.records[0]
        raise Finding(f"the port logged an error: {record.getMessage()} {record.exc_info!r}")
    first = _first_answer(reply, method)
    if first is None:
        if whole:
            raise Finding(f"a whole request closed without a whole answer: {reply[:300]!r}")
        return  # no whole request came (a header cut short, a body declared past the end)
    response, body, after = first
    status = response.status
    if status >= 500 and status not in _DOCUMENTED_5XX:
        raise Finding(f"answered {status}: {body[:300]!r}")
    if status != 200 and method != "HEAD":
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if not (
            isinstance(answer, dict)
            and list(answer) == ["error"]
            and isinstance(answer["error"], str)
        ):
            raise Finding(f"answered {status} without an error object: {reply[:300]!r}")
    for later in re.findall(rb"(?:^|\n)HTTP/1\.[01] (\d{3}) ", after):
        if int(later) >= 500 and int(later) not in _DOCUMENTED_5XX:
            raise Finding(f"a later answer on the connection is {int(later)}: {reply[:300]!r}")


rest_http = timed(rest_http, server=True)


# ------------------------------------------------------------------ gRPC requests, in process
# gRPC target name -> the request message its bytes are (for a protobuf-aware mutator).
GRPC_REQUESTS = {}


def _grpc_target(name, request_class, call):
    """A target parsing a `request_class` from wire bytes and answering it with
    `call(service, request)`, as the gRPC servicer does."""
    GRPC_REQUESTS[name] = request_class

    def target(data: bytes):
        try:
            request = request_class.FromString(data)
        except message.DecodeError:
            return  # grpc refuses it before any handler runs
        try:
            response = call(servables.server().service, request)
        except Exception as e:
            refused_well(e)
            return
        response.SerializeToString()

    target.__name__ = target.__qualname__ = name
    target.__doc__ = f"{request_class.DESCRIPTOR.name} wire bytes through InferenceService."
    return timed(target, server=True)


grpc_predict = _grpc_target("grpc_predict", predict_pb2.PredictRequest, lambda s, r: s.predict(r))
grpc_classify = _grpc_target(
    "grpc_classify", classification_pb2.ClassificationRequest, lambda s, r: s.classify(r)
)
grpc_regress = _grpc_target(
    "grpc_regress", regression_pb2.RegressionRequest, lambda s, r: s.regress(r)
)
grpc_multi_inference = _grpc_target(
    "grpc_multi_inference",
    inference_pb2.MultiInferenceRequest,
    lambda s, r: s.multi_inference(r),
)
grpc_model_metadata = _grpc_target(
    "grpc_model_metadata",
    get_model_metadata_pb2.GetModelMetadataRequest,
    lambda s, r: s.get_model_metadata(r),
)
grpc_model_status = _grpc_target(
    "grpc_model_status",
    get_model_status_pb2.GetModelStatusRequest,
    lambda s, r: s.get_model_status(r),
)


# ------------------------------------------------------------------ TensorProtos, structure-aware
# (model, signature key, input aliases) the structure-aware target sends to.
PROTO_SIGNATURES = [
    ("clf", "serving_default", ("text", "text_b")),
    ("clf", "encoded", ("input_mask", "input_type_ids", "input_word_ids")),
    ("reg", "serving_default", ("text",)),
    ("swag", "serving_default", ("choices", "text")),
    ("hp2", "serving_default", ("x",)),
    *[
        ("echo", key, ("default",))
        for key in ("int32", "float", "double", "string", "int8", "int16", "uint8", "int64")
        + ("uint32", "uint64", "bool", "float16")
    ],
    ("echo", "multi", ("dbl_tensor", "float_tensor", "int_tensor", "str_tensor")),
]
_DTYPES = sorted(types_pb2.DataType.values())
_COMMON_DTYPES = [
    types_pb2.DT_STRING,
    types_pb2.DT_INT32,
    types_pb2.DT_INT64,
    types_pb2.DT_FLOAT,
    types_pb2.DT_HALF,
    types_pb2.DT_DOUBLE,
    types_pb2.DT_BOOL,
    types_pb2.DT_BFLOAT16,
]
_HOSTILE_DIMS = [0, 1, 2, 3, 4, 5, -1, -2, 2**31 - 1, 2**31, 2**32 + 1, 2**62, 2**63 - 1, -(2**63)]
_VALUE_FIELDS = [
    "string_val",
    "int_val",
    "int64_val",
    "float_val",
    "double_val",
    "half_val",
    "bool_val",
    "uint32_val",
    "uint64_val",
    "scomplex_val",
    "dcomplex_val",
]
_ITEMSIZE = {enum: dtype.itemsize for enum, dtype in tensor_protos.RAW_DTYPES.items()}


def _field_values(src, field, count):
    if field == "string_val":
        return [src.take(src.pick([0, 1, 3, 8, 70])) for _ in range(count)]
    if field == "bool_val":
        return [bool(src.below(2)) for _ in range(count)]
    if field in ("float_val", "double_val", "scomplex_val", "dcomplex_val"):
        specials = [0.0, -0.0, 1.5, math.nan, math.inf, -math.inf, 3.5e38, 1e308]
        return [src.pick(specials) for _ in range(count)]
    bits = {"int_val": 32, "half_val": 32, "uint32_val": 32}.get(field, 64)
    signed = field in ("int_val", "half_val", "int64_val")
    values = []
    for _ in range(count):
        value = src.uint(bits // 8)
        if signed and value >= 2 ** (bits - 1):
            value -= 2**bits
        values.append(value)
    return values


def tensor_proto_from(src: ByteSource) -> tensor_pb2.TensorProto:
    """A TensorProto built from `src`: any dtype (mostly the common ones), unknown rank or a rank
    of 0-4 (rarely past numpy's 64), small or hostile dimensions, and `tensor_content` (sized to
    the shape or not) or value fields."""
    proto = tensor_pb2.TensorProto()
    proto.dtype = src.pick(_COMMON_DTYPES) if src.below(4) else src.pick(_DTYPES + [99, 10**6])
    if src.chance(16):
        proto.tensor_shape.unknown_rank = True
    rank = 65 if src.chance(64) else src.pick([0, 1, 1, 2, 2, 3, 4])
    for _ in range(rank):
        size = src.pick(_HOSTILE_DIMS) if src.chance(6) else src.below(5)
        proto.tensor_shape.dim.add(size=size)
    elements = math.prod(d.size for d in proto.tensor_shape.dim)
    kind = src.below(4)
    if kind == 1:  # raw bytes, mostly exactly what the shape needs
        need = elements * _ITEMSIZE.get(proto.dtype, 1)
        size = need if 0 <= need <= 4096 and src.below(4) else src.below(64)
        proto.tensor_content = src.take(size).ljust(size, b"\0")
    elif kind >= 2:  # value fields: the one of the dtype, or any
        for _ in range(1 + src.chance(4)):
            field = src.pick(_VALUE_FIELDS)
            count = elements if 0 <= elements <= 64 and src.below(3) else src.below(6)
            getattr(proto, field).extend(_field_values(src, field, count))
    return proto


def predict_request_from(src: ByteSource) -> predict_pb2.PredictRequest:
    """A PredictRequest to one of PROTO_SIGNATURES (at times with an input left out, an extra
    one, an unknown version or an output filter), its inputs built by `tensor_proto_from`."""
    model, key, aliases = src.pick(PROTO_SIGNATURES)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = key
    if src.chance(16):
        request.model_spec.version.value = src.pick([0, 1, 2, 123, 2**63 - 1])
    names = list(aliases)
    if src.chance(16):
        names.pop(src.below(len(names)))
    if src.chance(16):
        names.append("extra")
    for alias in names:
        request.inputs[alias].CopyFrom(tensor_proto_from(src))
    if src.chance(16):
        request.output_filter.append(src.pick(["y", "default", "scores", "nope"]))
    return request


def encode_string_list(strings) -> bytes:
    """TensorFlow's C++ port::EncodeStringList: every length as a varint32, then the bytes (the
    `tensor_content` of a DT_STRING TensorProto written by `AsProtoTensorContent`)."""
    strings = [bytes(s) for s in strings]
    lengths = bytearray()
    for s in strings:
        n = len(s)
        while n >= 0x80:
            lengths.append(n & 0x7F | 0x80)
            n >>= 7
        lengths.append(n)
    return bytes(lengths) + b"".join(strings)


# dtype -> (value field, bits, signed) where a value field holds wider integers than the dtype.
_NARROW = {
    types_pb2.DT_HALF: ("half_val", 16, False),
    types_pb2.DT_INT8: ("int_val", 8, True),
    types_pb2.DT_INT16: ("int_val", 16, True),
    types_pb2.DT_UINT8: ("int_val", 8, False),
    types_pb2.DT_UINT16: ("int_val", 16, False),
}


def _wrapped(proto):
    """`proto` with each value of a field wider than its dtype cut to the dtype's bits, as
    TensorFlow's C++ reads it (a static_cast); tf.make_ndarray refuses such values instead."""
    if proto.dtype not in _NARROW:
        return proto
    field, bits, signed = _NARROW[proto.dtype]
    values = [v % (1 << bits) for v in getattr(proto, field)]
    if signed:
        values = [v - (1 << bits) if v >= 1 << (bits - 1) else v for v in values]
    copy = tensor_pb2.TensorProto()
    copy.CopyFrom(proto)
    copy.ClearField(field)
    getattr(copy, field).extend(values)
    return copy


def _as_tensorflow_reads(proto):
    """tf.make_ndarray's value of `proto`, or None when it refuses it (or is not asked: only
    protos of at most 4,096 declared elements are read by both)."""
    import tensorflow as tf  # only for the comparison; serving.wire.tensors reads protos without it

    if proto.tensor_shape.unknown_rank or len(proto.tensor_shape.dim) > tensor_protos.MAX_RANK:
        return None
    dims = [d.size for d in proto.tensor_shape.dim]
    if min(dims, default=0) < 0 or math.prod(dims) > 4096:
        return None
    try:
        return tf.make_ndarray(proto)
    except Exception:
        return None


def _read_as_tensorflow(proto):
    """Finding when `serving.wire.tensor_protos` reads `proto` into another value than
    tf.make_ndarray, or takes one that TensorFlow refuses."""
    try:
        ours = tensor_protos.to_numpy(proto)
    except ValueError:
        return
    if proto.dtype == types_pb2.DT_STRING and proto.tensor_content:  # C++'s form, not Python's
        if encode_string_list(ours.flat) != proto.tensor_content:
            raise Finding(f"strings {ours.tolist()} do not encode back to {proto.tensor_content!r}")
        return
    theirs = _as_tensorflow_reads(_wrapped(proto))
    if theirs is None:
        if ours.size <= 4096:
            raise Finding(f"read a TensorProto that tf.make_ndarray refuses: {proto}")
        return
    if ours.dtype != theirs.dtype or ours.shape != theirs.shape:
        raise Finding(
            f"{ours.dtype}{ours.shape} against tf.make_ndarray's {theirs.dtype}{theirs.shape}"
        )
    if ours.dtype == object:  # tf.make_ndarray pads a compact string proto with str ""
        equal = list(ours.flat) == [x.encode() if isinstance(x, str) else x for x in theirs.flat]
    else:
        equal = np.array_equal(ours, theirs, equal_nan=ours.dtype.kind in "fc")
    if not equal:
        raise Finding(f"values differ from tf.make_ndarray's for {proto}")


# A refusal of a declared size (tensors.check_shape, check_rank, check_batch_size, the content
# counted against the shape): these must come before any allocation the size would drive.
_SIZE_REFUSAL = re.compile(r"elements|dimensions|batch size|has shape|unknown rank|holds \d+")


def grpc_tensor_protos(data: bytes):
    """A structure-aware Predict request (`predict_request_from`); properties: a documented
    answer, every input proto read as tf.make_ndarray reads it, and a request refused for a size
    it declares having allocated at most REFUSED_ALLOCATION_BYTES beyond 64x its own size
    (traced by tracemalloc)."""
    request = predict_request_from(ByteSource(data))
    for proto in request.inputs.values():
        _read_as_tensorflow(proto)
    service = servables.server().service
    tracemalloc.start()
    try:
        service.predict(request)
    except Exception as e:
        refused_well(e)
        grown = tracemalloc.get_traced_memory()[1]
        if (
            _SIZE_REFUSAL.search(str(e))
            and grown > REFUSED_ALLOCATION_BYTES + 64 * request.ByteSize()
        ):
            raise Finding(
                f"refused ({e}) after allocating {grown} bytes for a {request.ByteSize()}-byte "
                "request"
            ) from e
    finally:
        tracemalloc.stop()


grpc_tensor_protos = timed(grpc_tensor_protos, server=True)

TARGETS = {
    fn.__name__: fn
    for fn in (
        rest_json,
        rest_http,
        grpc_predict,
        grpc_classify,
        grpc_regress,
        grpc_multi_inference,
        grpc_model_metadata,
        grpc_model_status,
        grpc_tensor_protos,
    )
}
