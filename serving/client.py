"""`python -m serving.client`: send text to a TensorFlow Serving endpoint and print the prediction.

    python -m serving.client --server=localhost:8500 --model_name=sst2 "a gripping, funny film"
    python -m serving.client --model_name=sst2 "a gripping, funny film" "a dull mess"   # a batch of 2
    python -m serving.client --rest --rest_server=localhost:8501 --model_name=mrpc "text a" --text_b="text b"
    python -m serving.client --server=localhost:8500 --model_name=sst2 --status   # exit 0 iff AVAILABLE
    python -m serving.client --ssl_ca_file=ca.pem --ssl_client_cert_file=me.pem \
        --ssl_client_key_file=me.key --model_name=sst2 "text"   # TLS, mutual (client_verify)

Uses the official tensorflow-serving-api stubs (gRPC) or the REST API, so it works against this
project's server and stock tensorflow_model_server alike. It does not import TensorFlow: the protos
come through `serving.wire.protos` and tensors are written and read by
`serving.wire.tensor_protos`, so a call costs about what the gRPC call costs
(docs/results/serving.md, "Serving client start-up"). Calls the `serving_default` signature (inputs
`text` [B] and `text_b` [B] tf.string) and prints `labels` + `probabilities` (classification) or
`scores` (regression).
"""

import base64
import dataclasses
import http.client
import json
import ssl
import sys
import urllib.error
import urllib.request

import grpc
import numpy as np
from absl import app, flags

from serving.wire import tensor_protos
from serving.wire.protos import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)
from keras_bert import cli

_FLAGS = flags.FLAGS


def _define_flags():
    flags.DEFINE_string("server", "localhost:8500", "gRPC host:port.")
    flags.DEFINE_string("rest_server", "localhost:8501", "REST host:port (with --rest).")
    flags.DEFINE_boolean("rest", False, "Use the REST API instead of gRPC.")
    flags.DEFINE_string("model_name", "default", "Model name.")
    flags.DEFINE_integer("model_version", 0, "Model version (0 = latest).")
    flags.DEFINE_string("signature_name", "serving_default", "Signature to call.")
    flags.DEFINE_float("timeout", 30.0, "Request timeout in seconds.")
    flags.DEFINE_multi_string(
        "text_b",
        None,
        "Second text of a pair (pair tasks): one --text_b per positional TEXT, in the same order.",
    )
    flags.DEFINE_boolean(
        "status",
        False,
        "Print GetModelStatus and exit 0 iff a version is AVAILABLE (a readiness probe for gRPC).",
    )
    flags.DEFINE_boolean(
        "ssl",
        False,
        "Call over TLS (gRPC, and HTTPS with --rest), trusting the system's certificate "
        "authorities; implied by any --ssl_*_file flag.",
    )
    flags.DEFINE_string(
        "ssl_ca_file",
        None,
        "PEM file of the certificate authorities to trust for the server's certificate (a "
        "server's --ssl_config_file custom_ca or its issuer); default: the system's. Local file.",
    )
    flags.DEFINE_string(
        "ssl_client_cert_file",
        None,
        "PEM certificate chain this client presents (mutual TLS: a server with client_verify "
        "refuses a client without one); needs --ssl_client_key_file. Local file.",
    )
    flags.DEFINE_string(
        "ssl_client_key_file", None, "PEM private key of --ssl_client_cert_file. Local file."
    )


class ClientError(RuntimeError):
    """A failed call: `code` is the gRPC status name (e.g. 'INVALID_ARGUMENT') or the HTTP status."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


def _unavailable(details: str, tls) -> ClientError:
    """UNAVAILABLE with what a TLS refusal leaves unsaid: the handshake's failure reaches a
    client as "Socket closed" or a failed connection, never the reason; the causes a user can
    act on are named."""
    if tls is None:
        hint = "no answer; if the server serves TLS (--ssl_config_file), call it with --ssl"
    elif tls.cert_file is None:
        hint = (
            "under TLS: the server may require a client certificate (mutual TLS: "
            "--ssl_client_cert_file and --ssl_client_key_file), or this client may not trust "
            "its certificate (--ssl_ca_file: the CA that signed it)"
        )
    else:
        hint = (
            "under mutual TLS: the server may not trust this client's certificate (its "
            "custom_ca must hold the CA that signed it, valid now), or this client may not trust "
            "the server's (--ssl_ca_file)"
        )
    return ClientError("UNAVAILABLE", f"{details} ({hint})")


@dataclasses.dataclass(frozen=True)
class Tls:
    """TLS for a client's calls, from local PEM files (Python's ssl loads a client certificate
    only from files): the authorities to trust (`ca_file`; None: the system's) and, for mutual
    TLS, the client's certificate chain and key."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def __post_init__(self):
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError(
                "a client certificate needs its key and a key its certificate: give both "
                "--ssl_client_cert_file and --ssl_client_key_file, or neither"
            )
        for flag, path in self._files():  # an unreadable file is a usage error, not a refusal
            try:
                _read_pem(path)
            except OSError as e:
                raise ValueError(f"{flag} {path}: cannot be read ({e.strerror})") from None

    def _files(self):
        """(flag, path) of each file given."""
        named = (
            ("--ssl_ca_file", self.ca_file),
            ("--ssl_client_cert_file", self.cert_file),
            ("--ssl_client_key_file", self.key_file),
        )
        return [(flag, path) for flag, path in named if path is not None]

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=_read_pem(self.ca_file) if self.ca_file else None,
            private_key=_read_pem(self.key_file) if self.key_file else None,
            certificate_chain=_read_pem(self.cert_file) if self.cert_file else None,
        )

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context


def _read_pem(path) -> bytes:
    with open(path, "rb") as f:  # a local file, as the ssl module needs it
        return f.read()


def _channel(server, tls):
    """A gRPC channel to `server`: TLS with `tls` (a `Tls`), plain text when None."""
    if tls is None:
        return grpc.insecure_channel(server)
    return grpc.secure_channel(server, tls.grpc_credentials())


def _urlopen(url, tls, timeout, data=None):
    """urllib's urlopen of "host:port/path" `url` over HTTPS with `tls`, or HTTP when None."""
    scheme = "https" if tls else "http"
    request = urllib.request.Request(
        f"{scheme}://{url}",
        data=data,
        headers={"Content-Type": "application/json"} if data is not None else {},
    )
    return urllib.request.urlopen(
        request, timeout=timeout, context=tls.ssl_context() if tls else None
    )


def _as_bytes(texts, name):
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{name} must be a list of strings, not a single string")
    return [t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in texts]


def predict_text(
    server,
    model_name,
    texts,
    texts_b=None,
    signature_name="serving_default",
    version=None,
    timeout=30.0,
    rest=False,
    tls=None,
):
    """Calls a text signature and returns its outputs.

    Args:
        server: "host:port" of the gRPC API (or of the REST API when rest=True).
        model_name: served model name. texts: list of str [B]; texts_b: list of str [B] or None
            (pair tasks). signature_name: signature key. version: int or None (latest).
        tls: a `Tls` to call over TLS (HTTPS for REST), or None for plain text.
    Returns:
        dict output alias -> numpy array (e.g. probabilities float32 [B, C], label_ids int64 [B],
        labels object [B] of bytes; or scores [B]).
    Raises:
        ClientError with the gRPC status name (or HTTP status) and the server's message.
    """
    inputs = {"text": _as_bytes(texts, "texts")}
    if texts_b is not None:
        inputs["text_b"] = _as_bytes(texts_b, "texts_b")
    if rest:
        return _predict_rest(server, model_name, inputs, signature_name, version, timeout, tls)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    if version:
        request.model_spec.version.value = int(version)
    for name, values in inputs.items():
        request.inputs[name].CopyFrom(tensor_protos.to_proto(np.array(values, dtype=object)))
    with _channel(server, tls) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        try:
            response = stub.Predict(request, timeout=timeout)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                raise _unavailable(e.details(), tls) from None
            raise ClientError(e.code().name, e.details()) from None
    return {k: tensor_protos.to_numpy(v) for k, v in response.outputs.items()}


def _predict_rest(server, model_name, inputs, signature_name, version, timeout, tls):
    path = (
        f"/v1/models/{model_name}" + (f"/versions/{int(version)}" if version else "") + ":predict"
    )
    body = {
        "signature_name": signature_name,
        "inputs": {
            k: [{"b64": base64.b64encode(v).decode("ascii")} for v in values]
            for k, values in inputs.items()
        },
    }
    try:
        with _urlopen(server + path, tls, timeout, json.dumps(body).encode("utf-8")) as response:
            outputs = json.loads(response.read())["outputs"]
    except urllib.error.HTTPError as e:
        raise ClientError(e.code, json.loads(e.read() or b"{}").get("error", e.reason)) from None
    except TimeoutError as e:
        raise ClientError("DEADLINE_EXCEEDED", str(e)) from None
    except (OSError, http.client.HTTPException) as e:
        # No answer: refused, or a TLS handshake the server failed. Under TLS 1.3 a server that
        # wants a client certificate says so after the handshake, on the first read.
        raise _unavailable(str(getattr(e, "reason", e)), tls) from None
    if not isinstance(outputs, dict):  # one output: TF Serving drops its name; ask the metadata
        outputs = {
            _single_output_name(server, model_name, signature_name, version, timeout, tls): outputs
        }
    result = {}
    for name, value in outputs.items():
        array = np.array(value, dtype=object if _is_text(value) else None)
        if array.dtype == object:
            array = np.vectorize(
                lambda s: s.encode("utf-8") if isinstance(s, str) else base64.b64decode(s["b64"]),
                otypes=[object],
            )(array)
        result[name] = array
    return result


def _single_output_name(server, model_name, signature_name, version, timeout, tls):
    path = (
        f"/v1/models/{model_name}" + (f"/versions/{int(version)}" if version else "") + "/metadata"
    )
    with _urlopen(server + path, tls, timeout) as response:
        metadata = json.loads(response.read())
    (name,) = metadata["metadata"]["signature_def"]["signature_def"][signature_name]["outputs"]
    return name


def _is_text(value):
    while isinstance(value, list) and value:
        value = value[0]
    return isinstance(value, (str, dict))


def model_status(server, model_name, version=None, timeout=30.0, tls=None):
    """GetModelStatus over gRPC (TLS with `tls`) -> list of (version int, state name, error
    message)."""
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = model_name
    if version:
        request.model_spec.version.value = int(version)
    with _channel(server, tls) as channel:
        try:
            response = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(
                request, timeout=timeout
            )
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                raise _unavailable(e.details(), tls) from None
            raise ClientError(e.code().name, e.details()) from None
    state_name = get_model_status_pb2.ModelVersionStatus.State.Name
    return [
        (s.version, state_name(s.state), s.status.error_message)
        for s in response.model_version_status
    ]


def format_prediction(outputs, row=0):
    """One line per output for row `row`: labels with probabilities, or the regression score."""
    lines = []
    if "probabilities" in outputs:
        probs = outputs["probabilities"][row]
        labels = outputs.get("labels")
        label = labels[row].decode("utf-8") if labels is not None else str(int(np.argmax(probs)))
        lines.append(f"label: {label}")
        lines.append("probabilities: " + ", ".join(f"{p:.4f}" for p in np.reshape(probs, [-1])))
    if "label_ids" in outputs:
        lines.append(f"label_id: {int(outputs['label_ids'][row])}")
    if "scores" in outputs:
        lines.append(
            "score: " + ", ".join(f"{s:.4f}" for s in np.reshape(outputs["scores"][row], [-1]))
        )
    for name, value in sorted(outputs.items()):
        if name not in ("probabilities", "labels", "label_ids", "scores"):
            lines.append(f"{name}: {value[row]!r}")
    return "\n".join(lines)


def cli_tls():
    """The `Tls` the command line asks for (--ssl or any --ssl_*_file), or None.

    Raises:
        absl.app.UsageError: a client certificate without its key, or a key without it.
    """
    files = (_FLAGS.ssl_ca_file, _FLAGS.ssl_client_cert_file, _FLAGS.ssl_client_key_file)
    if not (_FLAGS.ssl or any(files)):
        return None
    try:
        return Tls(*files)
    except ValueError as e:
        raise app.UsageError(str(e)) from None


def _print_status(tls):
    try:
        statuses = model_status(
            _FLAGS.server, _FLAGS.model_name, _FLAGS.model_version or None, _FLAGS.timeout, tls
        )
    except ClientError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for version, state, error in statuses:
        print(f"version {version}: {state}" + (f" ({error})" if error else ""))
    return 0 if any(state == "AVAILABLE" for _, state, _ in statuses) else 1


def cli_texts(texts, texts_b):
    """The command line's batch: positional TEXTs [B] and the --text_b values [B] or None.

    Raises:
        absl.app.UsageError: no TEXT, or a --text_b count other than the TEXT count.
    """
    texts = list(texts)
    if not texts:
        raise app.UsageError(
            "give one or more TEXT arguments (a batch of texts); for pair tasks "
            "add one --text_b=TEXT_B per TEXT"
        )
    if texts_b is not None and len(texts_b) != len(texts):
        raise app.UsageError(
            f"got {len(texts)} TEXT arguments but {len(texts_b)} --text_b; give "
            "one --text_b per TEXT (pair tasks)"
        )
    return texts, (list(texts_b) if texts_b is not None else None)


def main(argv):
    tls = cli_tls()
    if _FLAGS.status:
        return _print_status(tls)
    texts, texts_b = cli_texts(argv[1:], _FLAGS.text_b)
    try:
        outputs = predict_text(
            _FLAGS.rest_server if _FLAGS.rest else _FLAGS.server,
            _FLAGS.model_name,
            texts,
            texts_b,
            _FLAGS.signature_name,
            _FLAGS.model_version or None,
            _FLAGS.timeout,
            rest=_FLAGS.rest,
            tls=tls,
        )
    except ClientError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if len(texts) == 1:
        print(format_prediction(outputs))
    for row, text in enumerate(texts if len(texts) > 1 else []):
        pair = f" | {texts_b[row]!r}" if texts_b is not None else ""
        print(f"[{row}] {text!r}{pair}\n{format_prediction(outputs, row)}")
    return 0


if __name__ == "__main__":
    _define_flags()
    cli.run(main)
