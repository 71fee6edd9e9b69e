"""`--ssl_config_file`: TLS for the gRPC port as tensorflow_model_server reads it, and for REST;
`python -m serving.ssl_config` writes that file from certificate files.

The file is a text-format `tensorflow.serving.SSLConfig` (tensorflow_serving/config/ssl_config.proto)
holding the PEM texts themselves, not file names, as TF Serving's server.cc reads them:

    server_key: "-----BEGIN PRIVATE KEY-----\\n...\\n-----END PRIVATE KEY-----\\n"
    server_cert: "-----BEGIN CERTIFICATE-----\\n...\\n-----END CERTIFICATE-----\\n"
    custom_ca: "-----BEGIN CERTIFICATE-----\\n...\\n-----END CERTIFICATE-----\\n"
    client_verify: true

Written from the usual files (atomically, through keras_bert.fileio; a local file is made readable
by its owner only, since it holds the private key):

    python -m serving.ssl_config --server_cert=server.pem --server_key=server.key \
        [--custom_ca=ca.pem --client_verify] --output=ssl.config

gRPC (as TF Serving's BuildServerCredentialsFromSSLConfigFile): the key and certificate chain
(`server_cert` may hold the chain, leaf first); with `client_verify`, clients must present a
certificate that `custom_ca` signed (mutual TLS), otherwise no client certificate is requested.
One difference: TF Serving falls back to the system's root certificates when `client_verify` is
set without `custom_ca`; gRPC's Python API has no such fallback, so that is refused here.

REST (our extension; TF Serving's REST port has no TLS): the same key, certificate and, under
`client_verify`, the same client-certificate rule, on the REST port (HTTPS only, TLS 1.2 or newer).

Checked before anything binds, the same way by the server and by the command (`check_tls`), each
problem one line naming the file (and field) and the cause, never a passphrase prompt: a field
that holds a file path instead of PEM text (the server names the command that writes the file),
text that is not PEM (or a key where a certificate belongs), an encrypted (passphrase-protected)
private key, a key that does not match the certificate, a server certificate outside its
validity period (expired or not yet valid), a CA bundle with no certificate inside its period,
and whatever else OpenSSL refuses to load. A CA bundle that still holds an expired CA beside a
valid one (a CA rotation) is taken, with one warning line per expired CA; a server certificate
without a subjectAltName is taken with a warning (clients that check host names refuse it).

The tensorflow-serving-api 2.20 wheel does not ship `ssl_config_pb2`; `ssl_config_message()` uses
it when installed, and otherwise registers the proto's one message, field for field, in protobuf's
default pool under the proto's own file name.
"""

import contextlib
import datetime
import logging
import os
import re
import ssl

import grpc
from absl import flags
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

from serving.wire import text_protos
from keras_bert import cli, fileio

_PROTO_FILE = "tensorflow_serving/config/ssl_config.proto"
_FIELDS = (  # ssl_config.proto: name, number, type
    ("server_key", 1, descriptor_pb2.FieldDescriptorProto.TYPE_STRING),
    ("server_cert", 2, descriptor_pb2.FieldDescriptorProto.TYPE_STRING),
    ("custom_ca", 3, descriptor_pb2.FieldDescriptorProto.TYPE_STRING),
    ("client_verify", 4, descriptor_pb2.FieldDescriptorProto.TYPE_BOOL),
)
_PEM_FIELDS = ("server_cert", "server_key", "custom_ca")  # the command's flag order
_PEM_BEGIN = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----")
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.DOTALL)
_WRITE_COMMAND = "python -m serving.ssl_config"
_FLAGS = flags.FLAGS
_LOG = logging.getLogger("serving")


class SSLConfigError(ValueError):
    """A --ssl_config_file (or a file for it) that cannot be used; the message is one line naming
    the file and the cause."""


def ssl_config_message():
    """The `tensorflow.serving.SSLConfig` message class (see the module docstring)."""
    try:
        from tensorflow_serving.config import ssl_config_pb2  # in wheels that ship it

        return ssl_config_pb2.SSLConfig
    except ImportError:
        pass
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(_PROTO_FILE)
    except KeyError:
        proto = descriptor_pb2.FileDescriptorProto(
            name=_PROTO_FILE, package="tensorflow.serving", syntax="proto3"
        )
        proto.options.cc_enable_arenas = True
        message = proto.message_type.add(name="SSLConfig")
        for name, number, kind in _FIELDS:
            message.field.add(
                name=name,
                number=number,
                type=kind,
                label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
            )
        pool.AddSerializedFile(proto.SerializeToString())
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.SSLConfig")
    )


def _one_line(text) -> str:
    return " ".join(str(text).split())


def _read(flag: str, path: str) -> bytes:
    """The bytes of the file `path` given by `flag`.

    Raises:
        SSLConfigError: "<flag> <path>: no such file" / "cannot read it (<cause>)".
    """
    try:
        fileio.check_reachable(path, "file")
        return fileio.read_bytes(path)
    except fileio.UnreachablePathError as e:
        raise SSLConfigError(f"{flag} {path}: {_one_line(e)}") from None
    except FileNotFoundError:
        raise SSLConfigError(f"{flag} {path}: no such file") from None
    except fileio.file_errors() as e:
        raise SSLConfigError(f"{flag} {path}: cannot read it ({_one_line(e)})") from None


def read_ssl_config(path: str):
    """Reads and checks `path` (a local path or any URI keras_bert.fileio handles).

    Returns:
        the SSLConfig message.
    Raises:
        SSLConfigError: "--ssl_config_file PATH: <problem>" for a file that cannot be read, is not
            a text-format SSLConfig, lacks server_key / server_cert, holds a file path where PEM
            text belongs, or fails `check_tls`.
    """

    def fail(problem):
        return SSLConfigError(f"--ssl_config_file {path}: {_one_line(problem)}")

    try:  # the rule for every file a user gives: UTF-8, a byte-order mark dropped
        text = fileio.decode_user_text(_read("--ssl_config_file", path), path)
    except fileio.UserFileError as e:
        raise fail(e.problem) from None
    try:
        config = text_protos.parse(text, ssl_config_message()())
    except text_format.ParseError as e:
        raise fail(f"not a text-format tensorflow.serving.SSLConfig ({e})") from None
    missing = [f for f in ("server_key", "server_cert") if not getattr(config, f).strip()]
    if missing:
        raise fail(f"{' and '.join(missing)} empty (give the PEM text itself)")
    paths = {
        f: getattr(config, f).strip() for f in _PEM_FIELDS if _looks_like_path(getattr(config, f))
    }
    if paths:
        field = next(f for f in ("server_key", "server_cert", "custom_ca") if f in paths)
        raise fail(
            f"{field} looks like a file path ({paths[field]}); SSLConfig holds the PEM text "
            f"itself: write this file with {_write_command(config, paths, path)}"
        )
    try:
        check_tls(config, {f: f for f, _, _ in _FIELDS})
    except SSLConfigError as e:
        raise fail(e) from None
    return config


def _looks_like_path(text: str) -> bool:
    """One line without a PEM block that names a file (a separator or an extension)."""
    text = text.strip()
    return bool(
        text
        and "\n" not in text
        and "-----BEGIN" not in text
        and re.search(r"[/\\]|\.[A-Za-z0-9]{1,4}$", text)
    )


def _write_command(config, paths, output) -> str:
    """The `python -m serving.ssl_config` line that writes `config` right, from the file paths
    found in it (placeholders for the rest)."""
    placeholders = {"server_cert": "CERT.pem", "server_key": "KEY.pem", "custom_ca": "CA.pem"}
    args = [
        f"--{f}={paths.get(f, placeholders[f])}"
        for f in _PEM_FIELDS
        if f != "custom_ca" or config.custom_ca.strip()
    ]
    if config.client_verify:
        args.append("--client_verify")
    return " ".join([_WRITE_COMMAND, *args, f"--output={output}"])


def _pem_blocks(text: str) -> str:
    """The PEM blocks of `text` alone, each line of each block stripped and each block on lines
    of its own: the one text of a certificate field that the check, the gRPC port and the REST
    port all read. Left as typed, they read it differently: cryptography's parser takes a block
    that starts mid-line (after a BOM, an indent, the end of the block before it) or is indented,
    BoringSSL (gRPC) and OpenSSL (REST) skip it, or bind nothing; Python's
    `load_verify_locations(cadata=...)` takes only ASCII text, and text around the blocks may be
    anything (OpenSSL skips it)."""
    return "".join(
        "\n".join(line.strip() for line in block.group(0).split("\n")) + "\n"
        for block in _PEM_BLOCK.finditer(text)
    )


def _found(text: str, wanted: str) -> str:
    labels = sorted(set(_PEM_BEGIN.findall(text)))
    if not labels:
        return f"no -----BEGIN {wanted}----- line"
    return f"it holds {' and '.join(labels)} instead"


def _refuse_passphrase():
    """OpenSSL's password callback: asked only for an encrypted key, it answers nothing (its
    default reads a passphrase from the terminal and waits)."""
    raise SSLConfigError("server_key is an encrypted private key (no passphrase is asked for)")


def _private_key(text: str, name: str):
    """The key of PEM `text` (never asking for a passphrase); `name` names it in errors."""
    labels = [label for label in _PEM_BEGIN.findall(text) if label.endswith("PRIVATE KEY")]
    if not labels:
        raise SSLConfigError(f"{name} is not a PEM private key ({_found(text, 'PRIVATE KEY')})")
    try:
        return serialization.load_pem_private_key(text.encode("utf-8"), password=None)
    except TypeError:  # cryptography: "Password was not given but private key is encrypted"
        raise SSLConfigError(
            f"{name} is an encrypted (passphrase-protected) private key, and the server never "
            "asks for a passphrase: decrypt it (openssl pkey -in ENCRYPTED.key -out KEY.pem) and "
            "keep the result readable by the server's user only"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise SSLConfigError(
            f"{name} holds a -----BEGIN {labels[0]}----- block that cannot be parsed"
        ) from None


def _certificates(text: str, name: str, now: datetime.datetime, bundle: bool = False) -> list:
    """The certificates of PEM `text`, each within its validity period at `now`; with `bundle`
    (a CA bundle), at least one within it: each other one is logged as one warning line and
    kept (during a CA rotation the bundle keeps the old CA until its clients have moved; OpenSSL
    trusts none that is outside its period)."""
    if "CERTIFICATE" not in _PEM_BEGIN.findall(text):
        raise SSLConfigError(f"{name} is not PEM certificate text ({_found(text, 'CERTIFICATE')})")
    try:
        certificates = x509.load_pem_x509_certificates(_pem_blocks(text).encode("utf-8"))
    except ValueError:
        raise SSLConfigError(
            f"{name} holds a -----BEGIN CERTIFICATE----- block that cannot be parsed"
        ) from None
    problems = [(c, _outside_validity(c, now)) for c in certificates]
    invalid = [(c, problem) for c, problem in problems if problem]
    if invalid and (not bundle or len(invalid) == len(certificates)):
        raise SSLConfigError(f"{name} holds a certificate {invalid[0][1]}")
    for _, problem in invalid:
        _LOG.warning(
            "%s holds a CA certificate %s: clients whose certificates only it signed are "
            "refused; it is kept beside the valid ones",
            name,
            problem,
        )
    return certificates


def _outside_validity(certificate, now: datetime.datetime) -> str:
    """ "(<subject>) that expired on ..." / "... that is not valid until ...", or "" within."""
    subject = certificate.subject.rfc4514_string() or "no subject"
    if certificate.not_valid_after_utc < now:
        return (
            f"({subject}) that expired on {certificate.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC"
        )
    if certificate.not_valid_before_utc > now:
        return (
            f"({subject}) that is not valid until "
            f"{certificate.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC"
        )
    return ""


def _names_of(certificate) -> list | None:
    """The DNS names and IP addresses of a certificate's subjectAltName (None: no extension)."""
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None
    return san.get_values_for_type(x509.DNSName) + [
        str(a) for a in san.get_values_for_type(x509.IPAddress)
    ]


def _warn_of_names_and_curve(certificate, name: str) -> None:
    """One warning line for a server certificate that clients will refuse though TLS loads it:
    no subjectAltName, one without a DNS name or IP address (golang #22922), or a P-521 key,
    which BoringSSL's clients (grpcio, the C++ client) cannot verify (grpc #6722)."""
    names = _names_of(certificate)
    if names is None:
        _LOG.warning(
            "%s has no subjectAltName: clients that check the server's name against it "
            "(Python's ssl, curl, browsers; gRPC falls back to its CN) refuse it; issue it with "
            "the DNS names or IP addresses clients connect to",
            name,
        )
    elif not names:
        _LOG.warning(
            "%s has a subjectAltName without a DNS name or IP address: every client that checks "
            "the server's name (gRPC included) refuses it; issue it with the names clients "
            "connect to",
            name,
        )
    key = certificate.public_key()
    if isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp521r1":
        _LOG.warning(
            "%s has a secp521r1 (P-521) key: gRPC clients (BoringSSL) end every handshake with "
            "NO_COMMON_SIGNATURE_ALGORITHMS; use P-256, P-384 or RSA",
            name,
        )


def _public_key_bytes(key) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def check_tls(config, names, now=None) -> None:
    """Checks that TLS can use `config` as the server will, without ever asking for a passphrase.

    Args:
        config: an SSLConfig message with server_key and server_cert set.
        names: field name -> how an error names it ("server_key" in the server, "--server_key
            key.pem" in the command).
        now: aware datetime for the validity check; default the current time.
    Raises:
        SSLConfigError: "<name> <problem>" (the cases in the module docstring).
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if config.client_verify and not config.custom_ca.strip():
        raise SSLConfigError(
            f"{names['client_verify']} needs {names['custom_ca']} (the PEM certificate of the CA "
            "that signs client certificates)"
        )
    key = _private_key(config.server_key, names["server_key"])
    chain = _certificates(config.server_cert, names["server_cert"], now)
    if config.custom_ca.strip():
        _certificates(config.custom_ca, names["custom_ca"], now, bundle=True)
    if _public_key_bytes(key.public_key()) != _public_key_bytes(chain[0].public_key()):
        raise SSLConfigError(
            f"{names['server_key']} does not match {names['server_cert']} (its first "
            "certificate is for another key)"
        )
    _warn_of_names_and_curve(chain[0], names["server_cert"])
    try:
        rest_ssl_context(config, trust=False)
    except (ssl.SSLError, ValueError) as e:
        raise SSLConfigError(
            f"{names['server_key']} and {names['server_cert']} cannot be used for TLS ({e})"
        ) from None
    if config.custom_ca.strip():
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(
                cadata=_pem_blocks(config.custom_ca)
            )
        except (ssl.SSLError, ValueError) as e:
            raise SSLConfigError(f"{names['custom_ca']} cannot be used for TLS ({e})") from None


def grpc_credentials(config) -> grpc.ServerCredentials:
    """gRPC server credentials for `config`, as tensorflow_model_server builds them."""
    return grpc.ssl_server_credentials(
        [(config.server_key.encode("utf-8"), _pem_blocks(config.server_cert).encode("utf-8"))],
        root_certificates=_pem_blocks(config.custom_ca).encode() if config.custom_ca else None,
        require_client_auth=bool(config.client_verify),
    )


def rest_ssl_context(config, trust: bool = True) -> ssl.SSLContext:
    """The REST port's server-side TLS context for `config` (our extension); `trust=False`
    leaves out the client CAs (`check_tls` checks them apart, to name them).

    Python's ssl module loads a key and certificate only from files, so they are written to a
    private local scratch directory (`fileio.local_temp_dir`, mode 0700) and deleted once loaded.

    Raises:
        ssl.SSLError: PEM text OpenSSL cannot load, or a key that does not match the certificate.
        SSLConfigError: an encrypted key (`_refuse_passphrase`: OpenSSL never prompts for it).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with fileio.local_temp_dir(prefix="keras_bert_tls_") as scratch:
        cert, key = fileio.join(scratch, "cert.pem"), fileio.join(scratch, "key.pem")
        fileio.write_text(cert, _pem_blocks(config.server_cert))
        fileio.write_text(key, config.server_key)
        context.load_cert_chain(certfile=cert, keyfile=key, password=_refuse_passphrase)
    if config.custom_ca and trust:
        context.load_verify_locations(cadata=_pem_blocks(config.custom_ca))
    if config.client_verify:
        context.verify_mode = ssl.CERT_REQUIRED
    return context


# ---------------------------------------------------------------- python -m serving.ssl_config
def build_ssl_config(server_cert: str, server_key: str, custom_ca: str = "", client_verify=False):
    """The SSLConfig for PEM files (local paths or URIs), checked as the server checks it
    (`check_tls`, errors naming the flag and file).

    Raises:
        SSLConfigError: a file that cannot be read or is not PEM text, or a `check_tls` problem.
    """
    files = {"server_cert": server_cert, "server_key": server_key, "custom_ca": custom_ca}
    names = {f: f"--{f} {path}" if path else f"--{f}" for f, path in files.items()}
    names["client_verify"] = "--client_verify"
    config = ssl_config_message()(client_verify=bool(client_verify))
    for field, path in files.items():
        if not path:
            continue
        try:
            setattr(config, field, fileio.decode_user_text(_read(f"--{field}", path), path))
        except fileio.UserFileError:
            raise SSLConfigError(
                f"{names[field]} is not PEM text (a binary file: DER? convert it with "
                f"openssl {'pkey' if field == 'server_key' else 'x509'} -inform der -in FILE -out "
                "FILE.pem)"
            ) from None
    check_tls(config, names)
    return config


@contextlib.contextmanager
def _owner_only():
    """New local files readable and writable by their owner only (umask 077) inside the block."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


def write_ssl_config(config, output: str) -> None:
    """Writes `config` as text format to `output` (any URI) whole or not at all; a local file is
    created readable by its owner only.

    Raises:
        OSError (or tf.errors.OpError for a URI): the file cannot be written.
    """
    with _owner_only():
        fileio.write_text(output, text_format.MessageToString(config))


def summary(config, output: str) -> str:
    """The command's one-line report."""

    def count(text, what):
        n = len(x509.load_pem_x509_certificates(_pem_blocks(text).encode())) if text.strip() else 0
        return f"{n} {what}{'' if n == 1 else 's'}"

    leaf = x509.load_pem_x509_certificates(_pem_blocks(config.server_cert).encode())[0]
    return (
        f"wrote {output}: server_cert {leaf.subject.rfc4514_string()} (valid until "
        f"{leaf.not_valid_after_utc:%Y-%m-%d}; {count(config.server_cert, 'certificate')} in the "
        f"chain), custom_ca {count(config.custom_ca, 'certificate')}, client_verify "
        f"{str(bool(config.client_verify)).lower()}; it holds the private key: keep it private"
    )


def _fail(message):
    cli.fail_usage(message, program="serving.ssl_config")


def define_flags():
    """The command line's flags (defined only when run as a program: the server imports this
    module and must not take them)."""
    flags.DEFINE_string("server_cert", None, "PEM certificate of the server (a chain: leaf first).")
    flags.DEFINE_string("server_key", None, "PEM private key of server_cert (not encrypted).")
    flags.DEFINE_string(
        "custom_ca", None, "PEM certificate(s) of the CA that signs client certificates."
    )
    flags.DEFINE_boolean(
        "client_verify", False, "Require client certificates signed by --custom_ca (mutual TLS)."
    )
    flags.DEFINE_string("output", None, "The SSLConfig file to write (--ssl_config_file).")


def main(argv):
    if len(argv) > 1:
        _fail(f"unexpected arguments {argv[1:]}")
    if not (_FLAGS.server_cert and _FLAGS.server_key and _FLAGS.output):
        _fail("give --server_cert, --server_key and --output")
    try:
        config = build_ssl_config(
            _FLAGS.server_cert, _FLAGS.server_key, _FLAGS.custom_ca or "", _FLAGS.client_verify
        )
        write_ssl_config(config, _FLAGS.output)
    except SSLConfigError as e:
        _fail(e)
    except fileio.file_errors() as e:
        _fail(f"--output {_FLAGS.output}: cannot write it ({e})")
    print(summary(config, _FLAGS.output))


if __name__ == "__main__":
    define_flags()
    cli.run(main)
