"""Fuzzing a live `python -m serving.server` over its sockets: schemathesis against the REST port's
OpenAPI description (docs/openapi.yaml), and a protobuf-mutating gRPC client that sends the
mutated wire bytes of valid requests (the gRPC seed corpora in tests/fuzz/corpus/) on a raw
channel. Used by tests/serving/test_openapi.py (a bounded run, seconds) and
tools/fuzz_live_server.py (the long run).

A finding is a 5xx answer (REST) or an INTERNAL / UNKNOWN / DATA_LOSS status (gRPC), an answer
that is not documented (status code, content type, body schema), a request that takes longer than
its deadline, or a server that stopped answering.
"""

import collections
import dataclasses
import pathlib
import random
import subprocess
import sys

import grpc
from google.protobuf import descriptor

from tests.fuzz import seeds, serving_targets

OPENAPI = pathlib.Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"
# Every unary RPC a client may send (HandleReloadConfigRequest, an administrative call that
# replaces the served models, is left out: a mutated one would reconfigure the server).
_PATHS = {
    "grpc_predict": "/tensorflow.serving.PredictionService/Predict",
    "grpc_classify": "/tensorflow.serving.PredictionService/Classify",
    "grpc_regress": "/tensorflow.serving.PredictionService/Regress",
    "grpc_multi_inference": "/tensorflow.serving.PredictionService/MultiInference",
    "grpc_model_metadata": "/tensorflow.serving.PredictionService/GetModelMetadata",
    "grpc_model_status": "/tensorflow.serving.ModelService/GetModelStatus",
}
# target -> (gRPC method path, request message class)
METHODS = {name: (path, serving_targets.GRPC_REQUESTS[name]) for name, path in _PATHS.items()}
FAULTS = {
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.DATA_LOSS,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
}
REST_CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,"
    "response_schema_conformance"
)


def seed_requests() -> dict:
    """target -> the wire bytes of its seed requests (tests/fuzz/corpus/<target>/seed-*)."""
    return {
        target: [p.read_bytes() for p in sorted((seeds.CORPUS / target).glob("seed-*"))]
        for target in METHODS
    }


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_HOSTILE_VARINTS = [0, 1, 2**31, 2**32 - 1, 2**63 - 1, 2**64 - 1, 2**35]


def mutate_bytes(data: bytes, rng: random.Random, others=()) -> bytes:
    """A byte-level mutation of `data`: a bit flip, a random byte, an insertion, a deletion, a
    duplicated or spliced chunk (from `others`), a truncation, a hostile varint field or a
    length-delimited field whose length is true or not."""
    data = bytearray(data)
    kind, at = rng.randrange(9), rng.randrange(len(data) + 1)
    if kind == 0 and data:
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == 1 and data:
        data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 2:
        data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif kind == 3 and data:
        del data[at : at + rng.randint(1, 16)]
    elif kind == 4 and data:
        start = rng.randrange(len(data))
        data[at:at] = data[start : start + rng.randint(1, 32)]
    elif kind == 5 and others:
        other = rng.choice(others)
        start = rng.randrange(len(other) + 1)
        data[at:at] = other[start : start + rng.randint(1, 64)]
    elif kind == 6:
        del data[at:]
    elif kind == 7:
        data[at:at] = _varint(rng.randint(1, 16) << 3) + _varint(rng.choice(_HOSTILE_VARINTS))
    else:
        payload = bytes(rng.randrange(256) for _ in range(rng.randint(0, 12)))
        length = len(payload) if rng.random() < 0.7 else rng.choice(_HOSTILE_VARINTS)
        data[at:at] = _varint(rng.randint(1, 16) << 3 | 2) + _varint(length) + payload
    return bytes(data)


_INTS = [0, 1, -1, 2, 3, 4, 7, 2**31 - 1, -(2**31), 2**31, 2**32, 2**62, 2**63 - 1, -(2**63)]
_FLOATS = [0.0, -0.0, 1.0, float("nan"), float("inf"), -float("inf"), 3.5e38, 1e-45]
_TEXTS = ["", "clf", "reg", "text", "text_b", "x", "serving_default", "é" * 3, "a" * 300]
_TEXTS += ["encoded", "classification", "regression", "tensorflow/serving/classify", "stable"]
_FD = descriptor.FieldDescriptor


def _value(field, rng):
    """A hostile or plausible value for a scalar field."""
    if field.type == _FD.TYPE_BOOL:
        return rng.random() < 0.5
    if field.type in (_FD.TYPE_FLOAT, _FD.TYPE_DOUBLE):
        return rng.choice(_FLOATS)
    if field.type == _FD.TYPE_STRING:
        return rng.choice(_TEXTS)
    if field.type == _FD.TYPE_BYTES:
        return rng.choice([b"", b"\xff\xfe", b"text", bytes(rng.randrange(256) for _ in range(9))])
    if field.type == _FD.TYPE_ENUM:
        return rng.choice([0, 1, 7, 14, 23, 99, 2**31 - 1, -1])
    return rng.choice(_INTS) if rng.random() < 0.7 else rng.randrange(-5, 6)


def mutate_message(message, rng: random.Random, depth=0):
    """Changes one field somewhere in `message` (in place): a scalar set to a hostile value, a
    repeated field grown, shrunk or cleared, a map entry added or removed, a sub-message
    cleared, or the same one level down (every message type, through its descriptor)."""
    field = rng.choice(message.DESCRIPTOR.fields)
    value = getattr(message, field.name)
    is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
    try:
        if is_map:
            value_field = field.message_type.fields_by_name["value"]
            keys = list(value)
            if keys and rng.random() < 0.3:
                del value[rng.choice(keys)]
                return
            key_field = field.message_type.fields_by_name["key"]
            key = rng.choice(keys) if keys and rng.random() < 0.6 else _value(key_field, rng)
            if value_field.message_type is not None:
                mutate_message(value[key], rng, depth + 1)
            else:
                value[key] = _value(value_field, rng)
        elif field.label == _FD.LABEL_REPEATED:
            if len(value) and rng.random() < 0.3:
                del value[rng.randrange(len(value)) :]
            elif field.message_type is not None:
                item = rng.choice(value) if len(value) and rng.random() < 0.6 else value.add()
                mutate_message(item, rng, depth + 1)
            else:
                count = rng.choice([1, 1, 2, 5, 100, 5000])
                value.extend(_value(field, rng) for _ in range(count))
        elif field.message_type is not None:
            if rng.random() < 0.15 or depth > 6:
                message.ClearField(field.name)
            else:
                mutate_message(value, rng, depth + 1)
        else:
            setattr(message, field.name, _value(field, rng))
    except (ValueError, TypeError):  # a value out of the field's range: another mutation
        pass


def mutate(data: bytes, request_class, rng: random.Random, others=()) -> bytes:
    """Mutated wire bytes of the `request_class` message `data`: one to three field-level
    mutations (`mutate_message`), then, one time in four, a byte-level one (`mutate_bytes`)."""
    message = request_class.FromString(data)
    for _ in range(rng.randint(1, 3)):
        mutate_message(message, rng)
    data = message.SerializeToString()
    return mutate_bytes(data, rng, others) if rng.random() < 0.25 else data


@dataclasses.dataclass
class GrpcRun:
    """Outcome of `mutate_grpc`: requests sent, status code counts, findings (target, code,
    details, the request's bytes)."""

    sent: int = 0
    codes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    findings: list = dataclasses.field(default_factory=list)


def mutate_grpc(
    target: str, count: int, seed: int = 0, timeout_s: float = 10.0, extra=None
) -> GrpcRun:
    """Sends `count` mutated requests (`mutate` of a seed request; the methods in turn) to the
    gRPC server at `target` on one raw channel and records what came back; stops at the first
    finding that the server no longer answers. `extra`: target -> more seed requests (wire
    bytes), e.g. to models the seeds do not name."""
    rng, run = random.Random(seed), GrpcRun()
    requests = seed_requests()
    for name, items in (extra or {}).items():
        requests[name] = requests[name] + list(items)
    pool = [data for items in requests.values() for data in items]
    options = [("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(target, options=options) as channel:
        calls = {
            name: channel.unary_unary(method, request_serializer=None, response_deserializer=None)
            for name, (method, _) in METHODS.items()
        }
        names = [name for name in METHODS if requests[name]]
        for i in range(count):
            name = names[i % len(names)]
            data = mutate(rng.choice(requests[name]), METHODS[name][1], rng, pool)
            run.sent += 1
            try:
                calls[name](data, timeout=timeout_s)
                run.codes[grpc.StatusCode.OK.name] += 1
            except grpc.RpcError as e:
                run.codes[e.code().name] += 1
                if e.code() in FAULTS:
                    run.findings.append((name, e.code().name, e.details(), data))
                    if e.code() == grpc.StatusCode.UNAVAILABLE:
                        break
    return run


def write_schemathesis_config(path, models, versions=(1,), labels=("stable",)):
    """A schemathesis.toml at `path` that draws most path parameters from what the server
    serves (`models`, `versions`, `labels`), the rest generated, so that cases reach the models
    as well as the refusals."""
    quoted = ", ".join(f'"{m}"' for m in models)
    labels = ", ".join(f'"{label}"' for label in labels)
    pathlib.Path(path).write_text(
        f"""[dictionaries.models]
values = [{quoted}]
[dictionaries.versions]
values = [{", ".join(str(v) for v in versions)}]
[dictionaries.labels]
values = [{labels}]

[parameters]
"path.model_name" = {{ dictionary = "models", probability = 0.8 }}
"path.version" = {{ dictionary = "versions", probability = 0.6 }}
"path.label" = {{ dictionary = "labels", probability = 0.6 }}
"""
    )
    return path


def schemathesis_command(
    rest_url: str, config_path, max_examples: int, seed: int = 0, max_time_s: int = 0
) -> list:
    """The `schemathesis run` command line checking the live REST port at `rest_url` against
    docs/openapi.yaml (`max_examples` cases per operation; every REST_CHECKS check), configured
    by `write_schemathesis_config`'s file."""
    command = [sys.executable, "-m", "schemathesis.cli", f"--config-file={config_path}", "run"]
    command += [
        str(OPENAPI),
        f"--url={rest_url}",
        f"--max-examples={max_examples}",
        f"--seed={seed}",
        f"--checks={REST_CHECKS}",
        "--phases=examples,fuzzing",
        "--workers=1",
        "--request-timeout=30",
        "--no-color",
        "--suppress-health-check=all",
        "--generation-database=none",
    ]
    if max_time_s:
        command.append(f"--max-time={max_time_s}")
    return command


def run_schemathesis(rest_url, config_path, max_examples, seed=0, max_time_s=0):
    """Runs `schemathesis_command`; returns (exit status, its output text)."""
    result = subprocess.run(
        schemathesis_command(rest_url, config_path, max_examples, seed, max_time_s),
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr
