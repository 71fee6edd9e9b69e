"""`--ssl_config_file`: TLS and mutual TLS with stock gRPC clients, HTTPS on the REST port, and
one-line errors for a config that cannot be used.

Certificates are made at test time with `cryptography`: a CA, a server certificate for localhost
and 127.0.0.1, a client certificate the CA signed, and a second CA with its own client
certificate (valid, but not signed by the server's custom_ca). The clients are grpcio's
`secure_channel` with the tensorflow-serving-api stubs, and urllib over HTTPS.
"""

import datetime
import http.client
import ipaddress
import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from serving import ssl_config
from tests.conftest import REPO_ROOT
from tests.serving.conftest import START_TIMEOUT_S
from tests.serving.test_grpc_api import TEXTS, TEXTS_B


# ---------------------------------------------------------------- certificates
def _pem_key(key):
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _certificate(subject, key, issuer_name, issuer_key, *, ca=False, server=False):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    elif not ca:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    return (
        builder.sign(issuer_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()
    )


def _authority(name):
    key = ec.generate_private_key(ec.SECP256R1())
    return name, key, _certificate(name, key, name, key, ca=True)


def _issued(authority, subject, server=False):
    name, ca_key, _ = authority
    key = ec.generate_private_key(ec.SECP256R1())
    return _pem_key(key), _certificate(subject, key, name, ca_key, server=server)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """PEM texts: "ca"; (key, cert) for "server", "client", "rogue"; "files": name -> (cert
    path, key path) of the two client identities (Python's ssl loads them only from files)."""
    ca, rogue_ca = _authority("keras-bert test CA"), _authority("another CA")
    made = {
        "ca": ca[2],
        "server": _issued(ca, "localhost", server=True),
        "client": _issued(ca, "a client"),
        "rogue": _issued(rogue_ca, "a client of another CA"),
        "files": {},
    }
    root = tmp_path_factory.mktemp("pki")
    for name in ("client", "rogue"):
        key, cert = made[name]
        (root / f"{name}.key").write_text(key)
        (root / f"{name}.crt").write_text(cert)
        made["files"][name] = (str(root / f"{name}.crt"), str(root / f"{name}.key"))
    return made


def _text_proto(pki, client_verify, **override):
    """An SSLConfig text proto written by hand (PEM newlines as \\n escapes)."""
    fields = {
        "server_key": pki["server"][0],
        "server_cert": pki["server"][1],
        "custom_ca": pki["ca"],
        **override,
    }
    lines = [f'{k}: "{v}"'.replace("\n", "\\n") for k, v in fields.items()]
    return "\n".join(lines + [f"client_verify: {str(client_verify).lower()}"]) + "\n"


# ---------------------------------------------------------------- parsing, in process
def test_reads_tf_servings_text_proto(tmp_path, pki):
    path = tmp_path / "ssl.config"
    path.write_text(_text_proto(pki, client_verify=True))
    config = ssl_config.read_ssl_config(str(path))
    assert config.DESCRIPTOR.full_name == "tensorflow.serving.SSLConfig"
    assert [f.name for f in config.DESCRIPTOR.fields] == [
        "server_key",
        "server_cert",
        "custom_ca",
        "client_verify",
    ]
    assert config.server_cert == pki["server"][1] and config.custom_ca == pki["ca"]
    assert config.client_verify is True
    context = ssl_config.rest_ssl_context(config)
    assert context.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize(
    "content, problem",
    [
        (None, "no such file"),
        ("server_key: 3 bogus", "not a text-format tensorflow.serving.SSLConfig"),
        ('server_kee: "x"', "not a text-format tensorflow.serving.SSLConfig"),
        ("client_verify: false", "server_key and server_cert empty"),
        ("no_ca", "client_verify needs custom_ca"),
        ("bad_pem", "the PEM text cannot be used for TLS"),
        ("mismatch", "the PEM text cannot be used for TLS"),
    ],
)
def test_bad_config_is_one_line_naming_the_file(tmp_path, pki, content, problem):
    path = tmp_path / "ssl.config"
    if content == "no_ca":
        content = _text_proto(pki, client_verify=True, custom_ca="")
    elif content == "bad_pem":
        content = _text_proto(pki, client_verify=False, server_cert="not a certificate")
    elif content == "mismatch":  # the client's key with the server's certificate
        content = _text_proto(pki, client_verify=False, server_key=pki["client"][0])
    if content is not None:
        path.write_text(content)
    with pytest.raises(ssl_config.SSLConfigError) as info:
        ssl_config.read_ssl_config(str(path))
    message = str(info.value)
    assert message.startswith(f"--ssl_config_file {path}: {problem}") and "\n" not in message


@pytest.mark.slow
def test_server_exits_2_with_one_line_for_a_bad_config(tmp_path, model_base):
    unparsable = tmp_path / "unparsable.config"
    unparsable.write_text("server_key: {")
    runs = {
        path: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "serving.server",
                f"--ssl_config_file={path}",
                f"--model_base_path={model_base / 'clf'}",
                "--port=0",
                "--rest_api_port=0",
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path in (tmp_path / "missing.config", unparsable)
    }
    for path, proc in runs.items():
        try:
            out, err = proc.communicate(timeout=180)
        finally:
            proc.kill()
        assert proc.returncode == 2, err[-2000:]
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"serving.server: error: --ssl_config_file {path}: "), err[-2000:]
        assert "Traceback" not in err


# ---------------------------------------------------------------- servers, stock clients
def _credentials(pki, client=None, trust_ca=True):
    key, cert = pki[client] if client else (None, None)
    return grpc.ssl_channel_credentials(
        root_certificates=pki["ca"].encode() if trust_ca else None,
        private_key=key.encode() if key else None,
        certificate_chain=cert.encode() if cert else None,
    )


def _wait_serving(server, credentials):
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(
                f"server exited with {server.proc.returncode}:\n{server.log()[-3000:]}"
            )
        try:
            with grpc.secure_channel(server.grpc_target, credentials) as channel:
                response = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=2
                )
            if response.status == health_pb2.HealthCheckResponse.SERVING:
                return server
        except grpc.RpcError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"TLS server not serving after {START_TIMEOUT_S}s:\n{server.log()[-3000:]}")


@pytest.fixture(scope="module")
def tls_servers(pki, model_base, tmp_path_factory):
    """Two servers for clf: "mtls" (client_verify: true) and "tls" (server certificate only)."""
    from tests.serving.conftest import ServerProcess

    root = tmp_path_factory.mktemp("tls")
    servers = {}
    for name, verify in (("mtls", True), ("tls", False)):
        config = root / f"{name}.config"
        config.write_text(_text_proto(pki, client_verify=verify))
        servers[name] = ServerProcess(
            [
                "--model_name=clf",
                f"--model_base_path={model_base / 'clf'}",
                "--file_system_poll_wait_seconds=0",
                f"--ssl_config_file={config}",
            ],
            root / f"{name}.log",
        )
    try:
        _wait_serving(servers["mtls"], _credentials(pki, "client"))
        _wait_serving(servers["tls"], _credentials(pki))
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def _predict(target, credentials):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "clf"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(TEXTS))
    request.inputs["text_b"].CopyFrom(tf.make_tensor_proto(TEXTS_B))
    with grpc.secure_channel(target, credentials) as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
            request, timeout=30
        )
    return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}


def _status(target, credentials):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "clf"
    with grpc.secure_channel(target, credentials) as channel:
        response = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(
            request, timeout=30
        )
    return [(s.version, s.state) for s in response.model_version_status]


AVAILABLE = get_model_status_pb2.ModelVersionStatus.AVAILABLE


@pytest.mark.slow
@pytest.mark.parametrize("name, client", [("mtls", "client"), ("tls", None), ("tls", "client")])
def test_grpc_predict_and_status_work_as_in_plain_text(tls_servers, pki, reference, name, client):
    target = tls_servers[name].grpc_target
    got = _predict(target, _credentials(pki, client))
    want = reference("clf", text=TEXTS, text_b=TEXTS_B)
    np.testing.assert_array_equal(got["probabilities"], want["probabilities"])
    assert list(got["labels"]) == list(want["labels"])
    assert _status(target, _credentials(pki, client)) == [(1, AVAILABLE)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "client, trust_ca", [(None, True), ("rogue", True)], ids=["no-certificate", "other-ca"]
)
def test_mtls_refuses_a_client_without_a_valid_certificate(tls_servers, pki, client, trust_ca):
    with pytest.raises(grpc.RpcError) as info:
        _status(tls_servers["mtls"].grpc_target, _credentials(pki, client, trust_ca))
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mtls", "tls"])
def test_plain_text_and_untrusted_server_are_refused(tls_servers, pki, name):
    server = tls_servers[name]
    with grpc.insecure_channel(server.grpc_target) as channel:
        with pytest.raises(grpc.RpcError) as info:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    # A client that does not trust the server's CA (the system roots only) refuses the server.
    with pytest.raises(grpc.RpcError) as info:
        _status(server.grpc_target, _credentials(pki, "client", trust_ca=False))
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE


def _https_context(pki, client=None):
    context = ssl.create_default_context(cadata=pki["ca"])
    if client:
        context.load_cert_chain(*pki["files"][client])
    return context


def _https(url, context, body=None):
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"} if body else {}
    )
    with urllib.request.urlopen(request, timeout=30, context=context) as response:
        return response.status, json.loads(response.read())


@pytest.mark.slow
@pytest.mark.parametrize("name, client", [("mtls", "client"), ("tls", None)])
def test_rest_over_https_works_as_in_plain_text(tls_servers, pki, reference, name, client):
    base = f"https://127.0.0.1:{tls_servers[name].rest_port}/v1/models/clf"
    context = _https_context(pki, client)
    status, body = _https(base, context)
    assert status == 200 and body["model_version_status"][0]["state"] == "AVAILABLE"
    doc = json.dumps({"inputs": {"text": TEXTS, "text_b": TEXTS_B}}).encode()
    status, body = _https(f"{base}:predict", context, doc)
    want = reference("clf", text=TEXTS, text_b=TEXTS_B)
    assert status == 200
    np.testing.assert_allclose(
        np.float32(body["outputs"]["probabilities"]), want["probabilities"], rtol=1e-6, atol=0
    )


@pytest.mark.slow
def test_rest_refuses_plain_http_and_a_client_without_a_certificate(tls_servers, pki):
    port = tls_servers["mtls"].rest_port
    with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
        _https(f"https://127.0.0.1:{port}/v1/models/clf", _https_context(pki))
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models/clf", timeout=30).read()
    # The server keeps serving verified clients after refusing those.
    status, _ = _https(f"https://127.0.0.1:{port}/v1/models/clf", _https_context(pki, "client"))
    assert status == 200


# ---------------------------------------------------------------- our client, both protocols
@pytest.mark.slow
def test_our_client_calls_tls_and_mtls_servers_and_is_refused_without_its_certificate(
    tls_servers, pki, reference, tmp_path
):
    from serving import client

    ca_file = tmp_path / "ca.pem"
    ca_file.write_text(pki["ca"])
    mutual = client.Tls(str(ca_file), *pki["files"]["client"])
    want = reference("clf", text=TEXTS, text_b=TEXTS_B)
    for name, tls in (("mtls", mutual), ("tls", client.Tls(str(ca_file)))):
        server = tls_servers[name]
        for target, rest in ((server.grpc_target, False), (f"127.0.0.1:{server.rest_port}", True)):
            got = client.predict_text(target, "clf", TEXTS, TEXTS_B, rest=rest, tls=tls)
            np.testing.assert_allclose(
                np.float32(got["probabilities"]), want["probabilities"], rtol=1e-6, atol=0
            )
            assert list(got["labels"]) == list(want["labels"]), (name, rest)
    target = tls_servers["mtls"].grpc_target
    assert client.model_status(target, "clf", tls=mutual) == [(1, "AVAILABLE", "")]
    for rest, where in ((False, target), (True, f"127.0.0.1:{tls_servers['mtls'].rest_port}")):
        with pytest.raises(client.ClientError) as info:  # no client certificate: refused
            client.predict_text(
                where, "clf", TEXTS, TEXTS_B, rest=rest, tls=client.Tls(str(ca_file))
            )
        assert info.value.code == "UNAVAILABLE", rest
    with pytest.raises(
        ValueError, match="give both --ssl_client_cert_file and --ssl_client_key_file"
    ):
        client.Tls(str(ca_file), cert_file=pki["files"]["client"][0])

    # The command line: the same call through the flags, one line per output.
    cert, key = pki["files"]["client"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "serving.client",
            f"--server={target}",
            "--model_name=clf",
            f"--ssl_ca_file={ca_file}",
            f"--ssl_client_cert_file={cert}",
            f"--ssl_client_key_file={key}",
            TEXTS[0],
            f"--text_b={TEXTS_B[0]}",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[0] == f"label: {want['labels'][0].decode()}"


def test_client_tls_files_that_cannot_be_read_are_named(tmp_path, pki):
    from serving import client

    missing = tmp_path / "missing.pem"
    with pytest.raises(
        ValueError, match=f"--ssl_ca_file {missing}: cannot be read \\(No such file"
    ):
        client.Tls(str(missing))
    cert, key = pki["files"]["client"]
    with pytest.raises(ValueError, match=f"--ssl_client_key_file {missing}: cannot be read"):
        client.Tls(None, cert, str(missing))
    assert client.Tls(None, cert, key).cert_file == cert
