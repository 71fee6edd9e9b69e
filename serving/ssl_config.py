"""`--ssl_config_file`: TLS for the gRPC port as tensorflow_model_server reads it, and for REST.

The file is a text-format `tensorflow.serving.SSLConfig` (tensorflow_serving/config/ssl_config.proto)
holding the PEM texts themselves, not file names, as TF Serving's server.cc reads them:

    server_key: "-----BEGIN PRIVATE KEY-----\\n...\\n-----END PRIVATE KEY-----\\n"
    server_cert: "-----BEGIN CERTIFICATE-----\\n...\\n-----END CERTIFICATE-----\\n"
    custom_ca: "-----BEGIN CERTIFICATE-----\\n...\\n-----END CERTIFICATE-----\\n"
    client_verify: true

gRPC (as TF Serving's BuildServerCredentialsFromSSLConfigFile): the key and certificate chain
(`server_cert` may hold the chain, leaf first); with `client_verify`, clients must present a
certificate that `custom_ca` signed (mutual TLS), otherwise no client certificate is requested.
One difference: TF Serving falls back to the system's root certificates when `client_verify` is
set without `custom_ca`; gRPC's Python API has no such fallback, so that is refused here.

REST (our extension; TF Serving's REST port has no TLS): the same key, certificate and, under
`client_verify`, the same client-certificate rule, on the REST port (HTTPS only, TLS 1.2 or newer).

The tensorflow-serving-api 2.20 wheel does not ship `ssl_config_pb2`; `ssl_config_message()` uses
it when installed, and otherwise registers the proto's one message, field for field, in protobuf's
default pool under the proto's own file name.
"""

import ssl

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

from serving.storage import fileio

_PROTO_FILE = "tensorflow_serving/config/ssl_config.proto"
_FIELDS = (  # ssl_config.proto: name, number, type
    ("server_key", 1, descriptor_pb2.FieldDescriptorProto.TYPE_STRING),
    ("server_cert", 2, descriptor_pb2.FieldDescriptorProto.TYPE_STRING),
    ("custom_ca", 3, descriptor_pb2.FieldDescriptorProto.TYPE_STRING),
    ("client_verify", 4, descriptor_pb2.FieldDescriptorProto.TYPE_BOOL),
)


class SSLConfigError(ValueError):
    """A --ssl_config_file that cannot be used; the message is one line naming the file."""


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


def read_ssl_config(path: str):
    """Reads and checks `path` (a local path or any URI keras_bert.fileio handles).

    Returns:
        the SSLConfig message.
    Raises:
        SSLConfigError: "--ssl_config_file PATH: <problem>" for a file that cannot be read, is not
            a text-format SSLConfig, lacks server_key / server_cert, sets client_verify without
            custom_ca, or holds PEM text that TLS cannot use (`rest_ssl_context` is the check).
    """

    def fail(problem):
        return SSLConfigError(f"--ssl_config_file {path}: {' '.join(str(problem).split())}")

    try:
        fileio.check_reachable(path, "file")
        text = fileio.read_text(path)
    except FileNotFoundError:
        raise fail("no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise fail(f"cannot read it ({e})") from None
    try:
        config = text_format.Parse(text, ssl_config_message()())
    except text_format.ParseError as e:
        raise fail(f"not a text-format tensorflow.serving.SSLConfig ({e})") from None
    missing = [f for f in ("server_key", "server_cert") if not getattr(config, f).strip()]
    if missing:
        raise fail(f"{' and '.join(missing)} empty (give the PEM text itself)")
    if config.client_verify and not config.custom_ca.strip():
        raise fail(
            "client_verify needs custom_ca (the PEM certificate of the CA that signs client "
            "certificates)"
        )
    try:
        rest_ssl_context(config)
    except (ssl.SSLError, ValueError) as e:
        raise fail(f"the PEM text cannot be used for TLS ({e})") from None
    return config


def grpc_credentials(config) -> grpc.ServerCredentials:
    """gRPC server credentials for `config`, as tensorflow_model_server builds them."""
    return grpc.ssl_server_credentials(
        [(config.server_key.encode("utf-8"), config.server_cert.encode("utf-8"))],
        root_certificates=config.custom_ca.encode("utf-8") if config.custom_ca else None,
        require_client_auth=bool(config.client_verify),
    )


def rest_ssl_context(config) -> ssl.SSLContext:
    """The REST port's server-side TLS context for `config` (our extension).

    Python's ssl module loads a key and certificate only from files, so they are written to a
    private local scratch directory (`fileio.local_temp_dir`, mode 0700) and deleted once loaded.

    Raises:
        ssl.SSLError: PEM text OpenSSL cannot load, or a key that does not match the certificate.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with fileio.local_temp_dir(prefix="keras_bert_tls_") as scratch:
        cert, key = fileio.join(scratch, "cert.pem"), fileio.join(scratch, "key.pem")
        fileio.write_text(cert, config.server_cert)
        fileio.write_text(key, config.server_key)
        context.load_cert_chain(certfile=cert, keyfile=key)
    if config.custom_ca:
        context.load_verify_locations(cadata=config.custom_ca)
    if config.client_verify:
        context.verify_mode = ssl.CERT_REQUIRED
    return context
