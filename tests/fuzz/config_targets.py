"""Fuzz targets for the server's text-proto config files: `target(data: bytes)`, the bytes being
the whole file, read by the same function the server reads it with.

A finding (as in `tests.fuzz.serving_targets`) is an exception other than the file's documented
errors (which `serving.server.main` turns into one line), more than `CPU_LIMIT_S` of CPU on one
input, or a wrong answer to a property:
- the file read the same with a leading byte-order mark as without (one decoding rule for every
  file a user gives, docs/cloud.md), and the same with Windows line ends;
- what is accepted keeps the checks' promises (unique non-empty model names, a base path that is
  absolute or a URI, sampling rates in [0, 1], versions a policy names among those on disk).

Targets (`TARGETS`):
    model_config       --model_config_file: `serving.server.model_configs` (which runs
                       `model_manager.check_configs` and `request_logger.check_logging_configs`:
                       the logging config lives in this file), then each config's version policy
                       through `model_manager.aspired_versions`. ValueError, OSError and
                       text_format.ParseError are documented.
    batching_config    --batching_parameters_file: `fileio.read_user_text` then
                       `batching.parse_batching_parameters`, as `serving.server.main`.
                       ValueError and text_format.ParseError are documented.
    ssl_config         --ssl_config_file: `ssl_config.read_ssl_config`; SSLConfigError is
                       documented. The placeholders @KEY@, @CERT@, @CA@, @EXPIRED@, @ENCKEY@,
                       @OTHERKEY@ become real PEM texts (made once per process), so the fuzzer
                       reaches the key, certificate and TLS checks.

The server reads no monitoring config (serving/configs/monitoring.config is for stock
tensorflow_model_server), so there is no target for one.

Run one with `python -m tests.fuzz.run <target>`; tests/fuzz/test_config_targets.py replays the
corpus (tests/fuzz/corpus/<target>/).
"""

import functools

# The server sets TensorFlow up before it reads a model config file (unless every path is local
# and --prefer_tflite_model), registering TensorFlow's protos: an Any field may name any of them.
import tensorflow  # noqa: F401
from cryptography.hazmat.primitives import serialization
from google.protobuf import text_format

from serving import ssl_config
from serving.dispatch import batching
from serving.models.model_manager import aspired_versions
from serving.server import model_configs
from keras_bert import fileio
from tests.fuzz.serving_targets import Finding, timed
from tests.fuzz.user_files import same_with_bom_and_crlf
from tests.serving import test_tls

VERSIONS_ON_DISK = (1, 2, 3, 7, 2**63 - 1)


@timed
def model_config(data: bytes):
    """--model_config_file bytes through `serving.server.model_configs`."""
    kind, configs = same_with_bom_and_crlf(
        _model_configs_from, data, (ValueError, OSError, text_format.ParseError)
    )
    if kind != "ok":
        return
    names = [c.name for c in configs]
    if not configs or not all(names) or len(set(names)) != len(names):
        raise Finding(f"accepted model names {names}")
    for c in configs:
        if not (fileio.scheme(c.base_path) or c.base_path.startswith("/")):
            raise Finding(f"model {c.name!r}: base_path {c.base_path!r} was not resolved")
        if c.HasField("logging_config"):
            rate = c.logging_config.sampling_config.sampling_rate
            if not 0 <= rate <= 1 or not c.logging_config.log_collector_config.filename_prefix:
                raise Finding(f"model {c.name!r}: accepted logging_config {c.logging_config}")
        chosen = aspired_versions(c.model_version_policy, VERSIONS_ON_DISK)
        if not chosen <= set(VERSIONS_ON_DISK):
            raise Finding(f"model {c.name!r}: versions {chosen} are not on disk")


def _model_configs_from(path):
    return model_configs(model_config_file=path)


def _batching_options(path):
    return batching.parse_batching_parameters(fileio.read_user_text(path))


@timed
def batching_config(data: bytes):
    """--batching_parameters_file bytes, read as `serving.server.main` reads them."""
    kind, options = same_with_bom_and_crlf(
        _batching_options, data, (ValueError, text_format.ParseError)
    )
    if kind == "ok" and options.execution_batch_size > options.max_batch_size:
        raise Finding(f"accepted {options}")


@functools.cache
def _pem_texts() -> dict:
    """Placeholder -> PEM text, escaped for a text-proto string: a CA, a server key and its
    certificate, an expired certificate, the key encrypted, another key."""
    authority = test_tls._authority("fuzz CA")
    key, cert = test_tls._issued(authority, "localhost", server=True)
    other_key, expired = test_tls._issued(authority, "old", valid=test_tls.PAST)
    texts = {
        "@KEY@": key,
        "@CERT@": cert,
        "@CA@": authority[2],
        "@EXPIRED@": expired,
        "@ENCKEY@": test_tls._encrypted(key, serialization.PrivateFormat.PKCS8),
        "@OTHERKEY@": other_key,
    }
    return {k.encode(): v.replace("\n", "\\n").encode() for k, v in texts.items()}


def with_pem_texts(data: bytes) -> bytes:
    """`data` with each placeholder replaced by its PEM text."""
    for placeholder, text in _pem_texts().items():
        data = data.replace(placeholder, text)
    return data


@timed
def ssl_config_target(data: bytes):
    """--ssl_config_file bytes (placeholders expanded) through `ssl_config.read_ssl_config`."""
    kind, config = same_with_bom_and_crlf(
        ssl_config.read_ssl_config,
        with_pem_texts(data),
        (ssl_config.SSLConfigError,),
    )
    if kind == "ok" and not (config.server_key.strip() and config.server_cert.strip()):
        raise Finding(f"accepted an SSLConfig without key or certificate: {config}")


ssl_config_target.__name__ = "ssl_config"

TARGETS = {fn.__name__: fn for fn in (model_config, batching_config, ssl_config_target)}
