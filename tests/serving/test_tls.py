"""`--ssl_config_file`: TLS and mutual TLS with stock gRPC clients, HTTPS on the REST port,
one-line errors for every certificate, key and CA a config cannot use (never a passphrase
prompt), and `python -m serving.ssl_config`, which writes the config from certificate files.

Certificates are made at test time with `cryptography`: a CA, a server certificate for localhost
and 127.0.0.1, a client certificate the CA signed, and a second CA with its own client
certificate (valid, but not signed by the server's custom_ca). The clients are grpcio's
`secure_channel` with the tensorflow-serving-api stubs, and urllib over HTTPS.
"""

import datetime
import fcntl
import http.client
import ipaddress
import json
import os
import pty
import select
import ssl
import stat
import subprocess
import sys
import termios
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


def _certificate(subject, key, issuer_name, issuer_key, *, ca=False, server=False, valid=None):
    """A PEM certificate; `valid` = (not before, not after), default 5 minutes ago to a day ahead."""
    now = datetime.datetime.now(datetime.timezone.utc)
    not_before, not_after = valid or (
        now - datetime.timedelta(minutes=5),
        now + datetime.timedelta(days=1),
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
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


def _authority(name, valid=None):
    key = ec.generate_private_key(ec.SECP256R1())
    return name, key, _certificate(name, key, name, key, ca=True, valid=valid)


def _issued(authority, subject, server=False, valid=None):
    name, ca_key, _ = authority
    key = ec.generate_private_key(ec.SECP256R1())
    return _pem_key(key), _certificate(subject, key, name, ca_key, server=server, valid=valid)


def _encrypted(pem_key, private_format):
    """`pem_key` behind the passphrase "secret" (PKCS#8, or OpenSSL's traditional form with a
    Proc-Type: 4,ENCRYPTED header)."""
    key = serialization.load_pem_private_key(pem_key.encode(), password=None)
    return key.private_bytes(
        serialization.Encoding.PEM, private_format, serialization.BestAvailableEncryption(b"secret")
    ).decode()


def _utc(*fields):
    return datetime.datetime(*fields, tzinfo=datetime.timezone.utc)


PAST = (_utc(2019, 1, 1), _utc(2020, 1, 2, 3, 4, 5))  # expired
FUTURE = (_utc(2100, 1, 2, 3, 4, 5), _utc(2101, 1, 1))  # not valid yet


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """PEM texts: "ca"; (key, cert) for "server", "client", "rogue", and for "expired" / "future"
    servers (certificates outside their validity period); "old_ca" (an expired CA certificate);
    the server's key encrypted ("encrypted": PKCS#8, "encrypted_traditional"); "files": name ->
    (cert path, key path) of "server", "client" and "rogue" (Python's ssl loads client identities
    only from files), and "ca_file"."""
    ca, rogue_ca = _authority("keras-bert test CA"), _authority("another CA")
    server = _issued(ca, "localhost", server=True)
    made = {
        "ca": ca[2],
        "server": server,
        "client": _issued(ca, "a client"),
        "rogue": _issued(rogue_ca, "a client of another CA"),
        "expired": _issued(ca, "localhost", server=True, valid=PAST),
        "future": _issued(ca, "localhost", server=True, valid=FUTURE),
        "old_ca": _authority("an expired CA", valid=PAST)[2],
        "no_san": _issued(ca, "localhost"),  # a certificate without subjectAltName
        "encrypted": _encrypted(server[0], serialization.PrivateFormat.PKCS8),
        "encrypted_traditional": _encrypted(
            server[0], serialization.PrivateFormat.TraditionalOpenSSL
        ),
        "files": {},
    }
    root = tmp_path_factory.mktemp("pki")
    for name in ("server", "client", "rogue"):
        key, cert = made[name]
        (root / f"{name}.key").write_text(key)
        (root / f"{name}.crt").write_text(cert)
        made["files"][name] = (str(root / f"{name}.crt"), str(root / f"{name}.key"))
    (root / "ca.crt").write_text(made["ca"])
    made["ca_file"] = str(root / "ca.crt")
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


ENCRYPTED = (
    "server_key is an encrypted (passphrase-protected) private key, and the server never asks "
    "for a passphrase: decrypt it (openssl pkey -in ENCRYPTED.key -out KEY.pem) and keep the "
    "result readable by the server's user only"
)


def _bad_config(pki, case, path):
    """(SSLConfig text, the problem read_ssl_config names after "--ssl_config_file PATH: ")."""
    cases = {
        "server_key: 3 bogus": (
            "server_key: 3 bogus",
            "not a text-format tensorflow.serving.SSLConfig (1:13 : 'server_key: 3 bogus': Expected "
            "string but found: '3')",
        ),
        "misspelt field": (
            'server_kee: "x"',
            "not a text-format tensorflow.serving.SSLConfig (1:1 : Message type "
            '"tensorflow.serving.SSLConfig" has no field named "server_kee".)',
        ),
        "empty": (
            "client_verify: false",
            "server_key and server_cert empty (give the PEM text itself)",
        ),
        "client_verify without custom_ca": (
            _text_proto(pki, client_verify=True, custom_ca=""),
            "client_verify needs custom_ca (the PEM certificate of the CA that signs client "
            "certificates)",
        ),
        "key not PEM": (
            _text_proto(pki, False, server_key="a key"),
            "server_key is not a PEM private key (no -----BEGIN PRIVATE KEY----- line)",
        ),
        "key block corrupt": (
            _text_proto(
                pki,
                False,
                server_key="-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n",
            ),
            "server_key holds a -----BEGIN PRIVATE KEY----- block that cannot be parsed",
        ),
        "key and cert swapped": (
            _text_proto(pki, False, server_key=pki["server"][1], server_cert=pki["server"][0]),
            "server_key is not a PEM private key (it holds CERTIFICATE instead)",
        ),
        "cert not PEM": (
            _text_proto(pki, False, server_cert="not a certificate"),
            "server_cert is not PEM certificate text (no -----BEGIN CERTIFICATE----- line)",
        ),
        "CA not PEM": (
            _text_proto(pki, False, custom_ca=pki["client"][0]),
            "custom_ca is not PEM certificate text (it holds PRIVATE KEY instead)",
        ),
        "encrypted key": (_text_proto(pki, False, server_key=pki["encrypted"]), ENCRYPTED),
        "encrypted key, traditional form": (
            _text_proto(pki, False, server_key=pki["encrypted_traditional"]),
            ENCRYPTED,
        ),
        "key of another certificate": (  # the client's key with the server's certificate
            _text_proto(pki, False, server_key=pki["client"][0]),
            "server_key does not match server_cert (its first certificate is for another key)",
        ),
        "expired cert": (
            _text_proto(pki, False, server_key=pki["expired"][0], server_cert=pki["expired"][1]),
            "server_cert holds a certificate (CN=localhost) that expired on 2020-01-02 03:04:05 UTC",
        ),
        "cert not valid yet": (
            _text_proto(pki, False, server_key=pki["future"][0], server_cert=pki["future"][1]),
            "server_cert holds a certificate (CN=localhost) that is not valid until "
            "2100-01-02 03:04:05 UTC",
        ),
        "expired CA": (
            _text_proto(pki, True, custom_ca=pki["old_ca"]),
            "custom_ca holds a certificate (CN=an expired CA) that expired on 2020-01-02 03:04:05 UTC",
        ),
        "file paths": (
            'server_key: "/etc/tls/server.key" server_cert: "/etc/tls/server.pem" '
            'custom_ca: "ca.pem" client_verify: true',
            "server_key looks like a file path (/etc/tls/server.key); SSLConfig holds the PEM "
            "text itself: write this file with python -m serving.ssl_config "
            "--server_cert=/etc/tls/server.pem --server_key=/etc/tls/server.key "
            f"--custom_ca=ca.pem --client_verify --output={path}",
        ),
        "one file path": (
            _text_proto(pki, False, server_cert="certs/server.crt", custom_ca=""),
            "server_cert looks like a file path (certs/server.crt); SSLConfig holds the PEM text "
            "itself: write this file with python -m serving.ssl_config "
            f"--server_cert=certs/server.crt --server_key=KEY.pem --output={path}",
        ),
    }
    return cases[case]


BAD_CONFIGS = [
    "server_key: 3 bogus",
    "misspelt field",
    "empty",
    "client_verify without custom_ca",
    "key not PEM",
    "key block corrupt",
    "key and cert swapped",
    "cert not PEM",
    "CA not PEM",
    "encrypted key",
    "encrypted key, traditional form",
    "key of another certificate",
    "expired cert",
    "cert not valid yet",
    "expired CA",
    "file paths",
    "one file path",
]


@pytest.mark.parametrize("case", BAD_CONFIGS)
def test_bad_config_is_one_line_naming_the_file_and_the_cause(tmp_path, pki, case):
    path = tmp_path / "ssl.config"
    content, problem = _bad_config(pki, case, path)
    path.write_text(content)
    with pytest.raises(ssl_config.SSLConfigError) as info:
        ssl_config.read_ssl_config(str(path))
    assert str(info.value) == f"--ssl_config_file {path}: {problem}"


def test_config_file_that_cannot_be_read_is_named(tmp_path):
    with pytest.raises(ssl_config.SSLConfigError) as info:
        ssl_config.read_ssl_config(str(tmp_path / "missing.config"))
    assert str(info.value) == f"--ssl_config_file {tmp_path / 'missing.config'}: no such file"
    with pytest.raises(ssl_config.SSLConfigError) as info:  # a directory: unreadable, even as root
        ssl_config.read_ssl_config(str(tmp_path))
    assert str(info.value) == (  # TensorFlow's file layer (imported here, as in the server)
        f"--ssl_config_file {tmp_path}: cannot read it ({tmp_path}; Is a directory)"
    )
    (tmp_path / "latin1.config").write_bytes(b'server_key: "\xe9"')
    with pytest.raises(ssl_config.SSLConfigError) as info:
        ssl_config.read_ssl_config(str(tmp_path / "latin1.config"))
    assert str(info.value) == (
        f"--ssl_config_file {tmp_path / 'latin1.config'}: not UTF-8 text: byte 0xe9 at byte "
        "offset 13 (line 1) (invalid continuation byte); save the file as UTF-8"
    )


def test_a_byte_order_mark_changes_nothing(tmp_path, pki):
    """Notepad saves UTF-8 with a byte-order mark: read as every user file is (keras_bert.fileio)."""
    text = _text_proto(pki, client_verify=True)
    (tmp_path / "plain.config").write_text(text)
    (tmp_path / "marked.config").write_bytes(b"\xef\xbb\xbf" + text.encode())
    marked = ssl_config.read_ssl_config(str(tmp_path / "marked.config"))
    assert marked == ssl_config.read_ssl_config(str(tmp_path / "plain.config"))
    assert marked.server_cert == pki["server"][1]


def test_text_around_the_ca_blocks_is_skipped_as_openssl_skips_it(pki):
    """Found by the ssl_config fuzz target: a non-ASCII character between the PEM blocks of
    custom_ca (a comment, a byte-order mark) raised TypeError from Python's
    load_verify_locations(cadata=...), which takes ASCII text only."""
    server_key, server_cert = pki["server"]
    custom_ca = "CA für Zürich\n\ufeff" + pki["ca"] + "end ✓\n"
    config = ssl_config.ssl_config_message()(
        server_key=server_key, server_cert=server_cert, custom_ca=custom_ca, client_verify=True
    )
    ssl_config.check_tls(config, {f: f for f, _, _ in ssl_config._FIELDS})
    context = ssl_config.rest_ssl_context(config)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in context.get_ca_certs()] == [
        ((("commonName", "keras-bert test CA"),),)
    ]


def test_an_encrypted_key_that_reaches_openssl_fails_instead_of_prompting(pki):
    """The REST context never asks for a passphrase even for a config `check_tls` did not see."""
    config = ssl_config.ssl_config_message()(
        server_key=pki["encrypted"], server_cert=pki["server"][1]
    )
    with pytest.raises(ssl_config.SSLConfigError) as info:
        ssl_config.rest_ssl_context(config)
    assert str(info.value) == "server_key is an encrypted private key (no passphrase is asked for)"


def _server(config_path, model_base, **popen):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "serving.server",
            f"--ssl_config_file={config_path}",
            f"--model_base_path={model_base / 'clf'}",
            "--port=0",
            "--rest_api_port=0",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


@pytest.mark.slow
def test_server_exits_2_with_one_line_for_a_bad_config(tmp_path, model_base):
    unparsable = tmp_path / "unparsable.config"
    unparsable.write_text("server_key: {")
    runs = {path: _server(path, model_base) for path in (tmp_path / "missing.config", unparsable)}
    for path, proc in runs.items():
        try:
            out, err = proc.communicate(timeout=180)
        finally:
            proc.kill()
        assert proc.returncode == 2, err[-2000:]
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"serving.server: error: --ssl_config_file {path}: "), err[-2000:]
        assert "Traceback" not in err


def _take_terminal():
    """In the child: a new session whose controlling terminal is stdin (a pty), the terminal
    OpenSSL's default passphrase callback reads from."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _terminal_output(controller) -> bytes:
    out = b""
    while select.select([controller], [], [], 0)[0]:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        out += chunk
    return out


@pytest.mark.slow
def test_encrypted_key_ends_the_server_at_start_without_a_prompt(tmp_path, model_base, pki):
    """On a terminal, OpenSSL's default callback prompted "Enter PEM pass phrase:" and waited
    forever; now the server ends with exit 2 and one line, and writes nothing to the terminal.
    The time is the server's imports (TensorFlow), a few seconds."""
    path = tmp_path / "ssl.config"
    content, problem = _bad_config(pki, "encrypted key", path)
    path.write_text(content)
    controller, terminal = pty.openpty()
    start = time.monotonic()
    proc = _server(path, model_base, stdin=terminal, preexec_fn=_take_terminal)
    os.close(terminal)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"no exit in 60 s; the terminal shows {_terminal_output(controller)!r}")
    finally:
        seconds = time.monotonic() - start
        shown = _terminal_output(controller)
        os.close(controller)
    assert proc.returncode == 2, err[-2000:]
    assert err.strip().splitlines()[-1] == (
        f"serving.server: error: --ssl_config_file {path}: {problem}"
    )
    assert "Traceback" not in err and shown == b""
    assert seconds < 60


# ---------------------------------------------------------------- python -m serving.ssl_config
def _command(*args):
    return subprocess.run(
        [sys.executable, "-m", "serving.ssl_config", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_command_writes_the_config_the_server_reads(tmp_path, pki):
    cert, key = pki["files"]["server"]
    output = tmp_path / "out" / "ssl.config"
    output.parent.mkdir()
    config = ssl_config.build_ssl_config(cert, key, pki["ca_file"], client_verify=True)
    ssl_config.write_ssl_config(config, str(output))
    assert sorted(p.name for p in output.parent.iterdir()) == ["ssl.config"]  # no temporary left
    assert stat.S_IMODE(output.stat().st_mode) == 0o600  # it holds the private key
    text = output.read_text()
    assert text.startswith('server_key: "-----BEGIN PRIVATE KEY-----\\n') and text.count("\n") == 4
    read = ssl_config.read_ssl_config(str(output))
    assert (read.server_key, read.server_cert, read.custom_ca, read.client_verify) == (
        pki["server"][0],
        pki["server"][1],
        pki["ca"],
        True,
    )
    leaf = x509.load_pem_x509_certificate(pki["server"][1].encode())
    assert ssl_config.summary(read, str(output)) == (
        f"wrote {output}: server_cert CN=localhost (valid until "
        f"{leaf.not_valid_after_utc:%Y-%m-%d}; 1 certificate in the chain), custom_ca 1 "
        "certificate, client_verify true; it holds the private key: keep it private"
    )


def _command_problem(tmp_path, pki, case):
    """(flags of `build_ssl_config`, the one line it raises) for each problem of the command."""
    cert, key = pki["files"]["server"]
    client_key = pki["files"]["client"][1]
    encrypted, der, missing = (tmp_path / n for n in ("encrypted.key", "server.der", "missing.key"))
    encrypted.write_text(pki["encrypted"])
    der.write_bytes(
        x509.load_pem_x509_certificate(pki["server"][1].encode()).public_bytes(
            serialization.Encoding.DER
        )
    )
    cases = {
        "missing key file": ((cert, str(missing)), f"--server_key {missing}: no such file"),
        "key file unreadable": (
            (cert, str(tmp_path)),  # a directory (TensorFlow's file layer, loaded in this process)
            f"--server_key {tmp_path}: cannot read it ({tmp_path}; Is a directory)",
        ),
        "encrypted key": (
            (cert, str(encrypted)),
            ENCRYPTED.replace("server_key", f"--server_key {encrypted}", 1),
        ),
        "DER certificate": (
            (str(der), key),
            f"--server_cert {der} is not PEM text (a binary file: DER? convert it with openssl "
            "x509 -inform der -in FILE -out FILE.pem)",
        ),
        "key of another certificate": (
            (cert, client_key),
            f"--server_key {client_key} does not match --server_cert {cert} (its first "
            "certificate is for another key)",
        ),
        "client_verify without custom_ca": (
            (cert, key, "", True),
            "--client_verify needs --custom_ca (the PEM certificate of the CA that signs client "
            "certificates)",
        ),
        "CA not PEM": (
            (cert, key, key),
            f"--custom_ca {key} is not PEM certificate text (it holds PRIVATE KEY instead)",
        ),
    }
    return cases[case]


@pytest.mark.parametrize(
    "case",
    [
        "missing key file",
        "key file unreadable",
        "encrypted key",
        "DER certificate",
        "key of another certificate",
        "client_verify without custom_ca",
        "CA not PEM",
    ],
)
def test_command_names_the_file_and_the_cause(tmp_path, pki, case):
    args, problem = _command_problem(tmp_path, pki, case)
    with pytest.raises(ssl_config.SSLConfigError) as info:
        ssl_config.build_ssl_config(*args)
    assert str(info.value) == problem


def test_command_line_writes_the_config_or_ends_with_one_line(tmp_path, pki):
    cert, key = pki["files"]["server"]
    output = tmp_path / "ssl.config"
    proc = _command(f"--server_cert={cert}", f"--server_key={key}", f"--output={output}")
    assert proc.returncode == 0, proc.stderr
    leaf = x509.load_pem_x509_certificate(pki["server"][1].encode())
    assert proc.stdout == (
        f"wrote {output}: server_cert CN=localhost (valid until "
        f"{leaf.not_valid_after_utc:%Y-%m-%d}; 1 certificate in the chain), custom_ca 0 "
        "certificates, client_verify false; it holds the private key: keep it private\n"
    )
    assert ssl_config.read_ssl_config(str(output)).server_key == pki["server"][0]
    failed = tmp_path / "failed.config"
    (key_args, encrypted_problem) = _command_problem(tmp_path, pki, "encrypted key")
    for args, problem in [
        (
            [f"--server_cert={cert}", f"--output={failed}"],
            "give --server_cert, --server_key and --output",
        ),
        (
            [f"--server_cert={cert}", f"--server_key={key_args[1]}", f"--output={failed}"],
            encrypted_problem,
        ),
    ]:
        proc = _command(*args)
        assert (proc.returncode, proc.stdout, proc.stderr) == (
            2,
            "",
            f"serving.ssl_config: error: {problem}\n",
        ), args
    assert not failed.exists()


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
    """Three servers for clf: "mtls" (client_verify: true), its config written by
    `python -m serving.ssl_config` from the certificate files, "tls" (server certificate
    only), its config written by hand as for tensorflow_model_server, and "rotation" (mutual TLS
    with a client-CA bundle that still lists an expired old CA)."""
    from tests.serving.conftest import ServerProcess

    root = tmp_path_factory.mktemp("tls")
    cert, key = pki["files"]["server"]
    written = _command(
        f"--server_cert={cert}",
        f"--server_key={key}",
        f"--custom_ca={pki['ca_file']}",
        "--client_verify",
        f"--output={root / 'mtls.config'}",
    )
    assert written.returncode == 0, written.stderr
    (root / "tls.config").write_text(_text_proto(pki, client_verify=False))
    servers = {}
    # A CA rotation: the bundle still lists the expired old CA beside the current one.
    (root / "rotation.config").write_text(
        _text_proto(pki, client_verify=True, custom_ca=pki["old_ca"] + pki["ca"])
    )
    for name in ("mtls", "tls", "rotation"):
        config = root / f"{name}.config"
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
        _wait_serving(servers["rotation"], _credentials(pki, "client"))
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
def test_a_client_ca_bundle_that_still_lists_an_expired_ca_serves_mutual_tls(
    tls_servers, pki, reference
):
    """OpenSearch security #4949: during a CA rotation the bundle keeps the old CA until its
    clients move. The server starts (it exited 2), names the expired CA in one warning line, and
    serves a client of the current CA; a client without a certificate is still refused."""
    server = tls_servers["rotation"]
    got = _predict(server.grpc_target, _credentials(pki, "client"))
    want = reference("clf", text=TEXTS, text_b=TEXTS_B)
    np.testing.assert_array_equal(got["probabilities"], want["probabilities"])
    warnings = [line for line in server.log().splitlines() if "an expired CA" in line]
    assert len(warnings) == 1 and warnings[0].endswith(
        "custom_ca holds a CA certificate (CN=an expired CA) that expired on 2020-01-02 "
        "03:04:05 UTC: clients whose certificates only it signed are refused; it is kept "
        "beside the valid ones"
    )
    with pytest.raises(grpc.RpcError) as info:
        _status(server.grpc_target, _credentials(pki, None))
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_bundle_of_only_expired_cas_is_still_refused_and_a_mixed_one_read(tmp_path, pki, caplog):
    from serving import ssl_config

    config = tmp_path / "ssl.config"
    config.write_text(_text_proto(pki, True, custom_ca=pki["old_ca"] + pki["old_ca"]))
    with pytest.raises(ssl_config.SSLConfigError) as refused:
        ssl_config.read_ssl_config(str(config))
    assert str(refused.value) == (
        f"--ssl_config_file {config}: custom_ca holds a certificate (CN=an expired CA) that "
        "expired on 2020-01-02 03:04:05 UTC"
    )
    config.write_text(_text_proto(pki, True, custom_ca=pki["ca"] + pki["old_ca"]))
    with caplog.at_level("WARNING", logger="serving"):
        assert ssl_config.read_ssl_config(str(config)).client_verify
    assert [r.getMessage() for r in caplog.records] == [
        "custom_ca holds a CA certificate (CN=an expired CA) that expired on 2020-01-02 "
        "03:04:05 UTC: clients whose certificates only it signed are refused; it is kept "
        "beside the valid ones"
    ]


def test_a_server_certificate_without_a_subject_alt_name_is_taken_with_a_warning(
    tmp_path, pki, caplog
):
    from serving import ssl_config

    config = tmp_path / "ssl.config"
    key, cert = pki["no_san"]
    config.write_text(_text_proto(pki, False, server_key=key, server_cert=cert))
    with caplog.at_level("WARNING", logger="serving"):
        ssl_config.read_ssl_config(str(config))
    assert [r.getMessage() for r in caplog.records] == [
        "server_cert has no subjectAltName: clients that check the server's name against it "
        "(Python's ssl, curl, browsers; gRPC falls back to its CN) refuse it; issue it with the "
        "DNS names or IP addresses clients connect to"
    ]
    caplog.clear()
    config.write_text(_text_proto(pki, False))
    with caplog.at_level("WARNING", logger="serving"):
        ssl_config.read_ssl_config(str(config))
    assert caplog.records == []


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
        # What the handshake's refusal leaves unsaid ("Socket closed"), the client names.
        assert info.value.message.endswith(
            "(under TLS: the server may require a client certificate (mutual TLS: "
            "--ssl_client_cert_file and --ssl_client_key_file), or this client may not trust "
            "its certificate (--ssl_ca_file: the CA that signed it))"
        ), info.value.message
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
