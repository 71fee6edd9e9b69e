"""`python -m serving.server`: a drop-in stand-in for `tensorflow_model_server` (SPEC section 8).

    python -m serving.server --port=8500 --rest_api_port=8501 \
        --model_name=sst2 --model_base_path=/models/sst2
    python -m serving.server --model_config_file=models.config --enable_batching \
        --batching_parameters_file=batching.config

Flags keep tensorflow_model_server's names (`--tensorflow_intra_op_parallelism` and
`--tensorflow_inter_op_parallelism` size TensorFlow's thread pools as there); extra ones (--host,
--max_request_bytes, --max_request_batch_size, --max_request_elements, --max_text_length, --text_inputs,
--custom_op_modules) are documented below and in docs/deployment.md. Serves any SavedModel from its signatures alone.

Base paths and the config file may be local paths or any URI `tf.io.gfile` handles (`gs://`,
`hdfs://`, `s3://` with its plugin, `ram://`), read through `keras_bert.fileio`: which version
directories load when, failed loads (`--max_num_load_retries`, `--load_retry_interval_micros`) and
base paths that cannot be reached are described in `serving.models.model_manager`;
`--model_config_file_poll_wait_seconds` re-reads the config file and applies a changed one, and
applies it again while part of it waits on load state (a label whose version is not loaded yet).

`--ssl_config_file` (tensorflow_model_server's flag): TLS on the gRPC port from a text-format
`tensorflow.serving.SSLConfig`, mutual TLS with `client_verify`, and HTTPS on the REST port (our
extension); see `serving.ssl_config`. A file that cannot be used ends the program with one line.

`logging_config` in a `--model_config_file` entry (TF Serving's LoggingConfig: sampling_rate,
filename_prefix) writes sampled requests and their responses as PredictionLog TFRecords, which
stock tensorflow_model_server cannot do; `--request_log_max_file_bytes` and
`--request_log_queue_size` (ours) size the files and the queue. See
`serving.monitoring.request_logger`; `python -m serving.request_log` turns the files into a
warmup file or a table of texts.

`--prefer_tflite_model` (tensorflow_model_server's flag): a version directory holding `model.tflite`
(`python -m export --export_tflite` or `--export_quantize=int8`) is served from that file by the LiteRT
interpreter, with the flatbuffer's signatures only (`encoded` for our exports);
`--tensorflow_intra_op_parallelism` then also sets the interpreter's threads.
"""

import concurrent.futures
import dataclasses
import importlib
import logging
import signal
import sys
import threading

import grpc
from absl import flags
from google.protobuf import text_format
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc
from tensorflow_serving.config import model_server_config_pb2

from keras_bert import cli, fileio
from keras_bert.training import flag_dependencies  # the table every recipe checks too

from serving import ssl_config
from serving.dispatch import batching
from serving.dispatch.inference import InferenceService
from serving.models import servable
from serving.monitoring import request_logger
from serving.protocol import grpc_service
from serving.wire import errors, service_protos, tensors, text_protos
from serving.monitoring.metrics import Metrics
from serving.models.model_manager import (
    LOAD_RETRY_INTERVAL_S,
    MAX_NUM_LOAD_RETRIES,
    REACH_TIMEOUT_S,
    ModelManager,
    check_configs,
)
from serving.protocol.rest import RestApi, RestOptions, RestServer, raise_open_files_limit


_LOG = logging.getLogger("serving")
_FLAGS = flags.FLAGS
# The flags that name a file or directory: given empty, they are refused (`main`).
PATH_FLAGS = ("model_base_path", "model_config_file", "batching_parameters_file", "ssl_config_file")
flags.DEFINE_integer("port", 8500, "Port for the gRPC API.")
flags.DEFINE_integer("rest_api_port", 8501, "Port for the REST API; 0 disables it.")
flags.DEFINE_string("host", "127.0.0.1", "Address to bind (0.0.0.0 for all interfaces).")
flags.DEFINE_string("model_name", "default", "Name of the model (with --model_base_path).")
flags.DEFINE_string(
    "model_base_path",
    "",
    "Directory holding integer version subdirectories: a local path or any URI "
    "tf.io.gfile handles (gs://, hdfs://, s3:// with its plugin, ram://).",
)
flags.DEFINE_string(
    "model_config_file",
    "",
    "Text-format ModelServerConfig (several models, version "
    "policies, labels), a local path or a URI; instead of --model_name/--model_base_path "
    "(which are refused beside it).",
)
flags.DEFINE_float(
    "model_config_file_poll_wait_seconds",
    0,
    "Seconds between reads of --model_config_file; a changed config is applied as "
    "HandleReloadConfigRequest applies it. 0 reads it once at start.",
    lower_bound=0,
)
flags.DEFINE_integer(
    "max_num_load_retries",
    MAX_NUM_LOAD_RETRIES,
    "Retries of a version whose load failed, before giving up on it (until its files change).",
    lower_bound=0,
)
flags.DEFINE_integer(
    "load_retry_interval_micros",
    int(LOAD_RETRY_INTERVAL_S * 1e6),
    "Microseconds between those retries.",
    lower_bound=0,
)
flags.DEFINE_float(
    "file_system_poll_wait_seconds",
    1.0,
    "Seconds between polls for new/removed versions; 0 polls once at start.",
)
flags.DEFINE_boolean(
    "enable_batching", False, "Merge concurrent requests into batched model calls."
)
flags.DEFINE_string(
    "batching_parameters_file", "", "With --enable_batching: text-format BatchingParameters."
)
flags.DEFINE_boolean(
    "enable_large_batch_splitting",
    False,
    "With --enable_batching: split a request "
    "larger than one model call (max_batch_size, or max_execution_batch_size) into "
    "several calls instead of refusing it (the BatchingParameters field of the same "
    "name does the same).",
)
flags.DEFINE_integer("grpc_max_threads", 16, "gRPC worker threads.")
flags.DEFINE_integer(
    "rest_api_num_threads",
    RestOptions.num_threads,
    "Threads answering REST requests (tensorflow_model_server's flag); the connections "
    "themselves take no thread.",
)
flags.DEFINE_integer(
    "rest_api_max_connections",
    RestOptions.max_connections,
    "Most REST connections open at once; more are answered 503 and closed.",
)
flags.DEFINE_float(
    "rest_api_idle_timeout_seconds",
    RestOptions.idle_timeout_s,
    "A REST request's header must be whole within this many seconds of the connection "
    "opening or of its previous response; an idle keep-alive connection is closed after it.",
)
flags.DEFINE_float(
    "rest_api_body_timeout_seconds",
    RestOptions.body_timeout_s,
    "A REST request's body must be whole within this many seconds of its header.",
)
flags.DEFINE_string(
    "ssl_config_file",
    "",
    "Text-format tensorflow.serving.SSLConfig (server_key, server_cert, custom_ca: the PEM "
    "texts; client_verify: mutual TLS; python -m serving.ssl_config writes it from the files), "
    "a local path or a URI: TLS on the gRPC port as tensorflow_model_server, and (our "
    "extension) HTTPS on the REST port.",
)
flags.DEFINE_integer(
    "request_log_max_file_bytes",
    request_logger.DEFAULT_MAX_FILE_BYTES,
    "Our extension: bytes after which a request log file (logging_config) is closed and the "
    "next one started.",
    lower_bound=1,
)
flags.DEFINE_integer(
    "request_log_queue_size",
    request_logger.DEFAULT_QUEUE_SIZE,
    "Our extension: sampled requests (with their responses) held per model for the request "
    "log's writer; when it is full (a slow disk) new records are dropped and counted.",
    lower_bound=1,
)
flags.DEFINE_integer(
    "tensorflow_intra_op_parallelism",
    0,
    "Threads one TensorFlow op may use (0 = "
    "TensorFlow's default, one per core). 1 gives the lowest batch-1 latency on a "
    "few cores (docs/results/encoder.md).",
    lower_bound=0,
)
flags.DEFINE_integer(
    "tensorflow_inter_op_parallelism",
    0,
    "Threads running independent ops (and "
    "concurrent requests) in parallel (0 = TensorFlow's default).",
    lower_bound=0,
)
flags.DEFINE_boolean(
    "prefer_tflite_model",
    False,
    "Serve a version's model.tflite (LiteRT, XNNPACK) "
    "instead of its SavedModel when it has one; only the flatbuffer's signatures "
    "are served (as tensorflow_model_server --prefer_tflite_model).",
)
flags.DEFINE_integer(
    "max_request_bytes",
    64 << 20,
    "Largest request message/body in bytes; larger is RESOURCE_EXHAUSTED (gRPC) / 413 (REST).",
)
flags.DEFINE_integer(
    "max_request_batch_size",
    4096,
    "Most rows per request (0 = no limit); more is INVALID_ARGUMENT.",
)
flags.DEFINE_integer(
    "max_request_elements",
    tensors.Limits.max_elements,
    "Most elements one input tensor of a request may declare (the product of its dimensions; "
    "0 = no limit); more is INVALID_ARGUMENT, refused before anything is allocated.",
)
flags.DEFINE_integer("max_text_length", 65536, "Most UTF-8 bytes per text element (0 = no limit).")
flags.DEFINE_list(
    "text_inputs",
    list(tensors.DEFAULT_TEXT_INPUTS),
    "String inputs / tf.Example features checked as UTF-8 text.",
)
flags.DEFINE_list(
    "custom_op_modules",
    ["tensorflow_text"],
    "Python modules imported at start-up so "
    "SavedModels using their ops load (skipped if not installed).",
)


def _resolve(base_path, config_dir):
    """A config's base_path: a URI or an absolute path as written, a relative one under the
    directory of the config file (as TF Serving resolves it)."""
    if fileio.scheme(base_path) or base_path.startswith("/"):
        return base_path
    return fileio.join(config_dir, base_path)


def model_configs(model_name="default", model_base_path="", model_config_file=""):
    """ModelConfig protos from a config file or a single name + base path (local paths made
    absolute; URIs kept as typed).

    Raises:
        ValueError: no model given, a config without entries / with bad entries, or a config
            file that is not UTF-8 (`fileio.UserFileError`; a byte-order mark is dropped).
        OSError (fileio.UnreachablePathError, FileNotFoundError): an unreadable config file.
        text_format.ParseError: not a text-format ModelServerConfig.
    """
    if model_config_file:
        fileio.check_reachable(model_config_file, "model config file", REACH_TIMEOUT_S)
        config = text_protos.parse(
            fileio.read_user_text(model_config_file),
            model_server_config_pb2.ModelServerConfig(),
            model_config_file,
        )
        configs = list(config.model_config_list.config)
        if not configs:
            raise ValueError(f"{model_config_file}: model_config_list has no config entries")
        config_dir = fileio.parent(fileio.absolute(model_config_file))
        check_configs(configs)
        request_logger.check_logging_configs(configs)
        for c in configs:
            c.base_path = _resolve(c.base_path, config_dir)
            if c.HasField("logging_config"):
                collector = c.logging_config.log_collector_config
                collector.filename_prefix = _resolve(collector.filename_prefix, config_dir)
        return configs
    if not model_base_path:
        raise ValueError("give --model_base_path (with --model_name) or --model_config_file")
    return [
        model_server_config_pb2.ModelConfig(
            name=model_name, base_path=fileio.absolute(model_base_path), model_platform="tensorflow"
        )
    ]


def set_tensorflow_threads(intra_op: int, inter_op: int) -> None:
    """Sizes TensorFlow's thread pools (0 keeps its default); must run before any model loads.

    Raises:
        RuntimeError: if TensorFlow's runtime was already initialised in this process.
    """
    import tensorflow as tf

    if intra_op:
        tf.config.threading.set_intra_op_parallelism_threads(intra_op)
    if inter_op:
        tf.config.threading.set_inter_op_parallelism_threads(inter_op)
    _LOG.info(
        "TensorFlow threads: intra-op %d, inter-op %d (0 = one per core)",
        tf.config.threading.get_intra_op_parallelism_threads(),
        tf.config.threading.get_inter_op_parallelism_threads(),
    )


def import_custom_op_modules(names):
    """Imports each module (e.g. tensorflow_text) so its ops are registered; missing ones are skipped."""
    for name in names:
        try:
            importlib.import_module(name)
            _LOG.info("imported %s (custom ops registered)", name)
        except ImportError as e:
            _LOG.warning(
                "could not import %s (%s); SavedModels using its ops will fail to load", name, e
            )


class ModelServer:
    """The gRPC + REST server around a ModelManager. `start()`, then `stop()`.

    Args:
        configs: ModelConfig protos. host/port/rest_api_port: bind address (rest 0 = off).
        poll_seconds, batching (BatchingOptions or None), limits (tensors.Limits), max_request_bytes,
        grpc_max_threads, max_num_load_retries: see the flags. load_retry_interval_s: float
        seconds (--load_retry_interval_micros / 1e6).
        config_file: the --model_config_file `configs` came from, re-read every
            `config_poll_seconds` (0: never) and applied with `ModelManager.reload` when it
            changed or part of it waits on load state (`reload_config_file`); a file that cannot
            be read or parsed is logged and the served set kept.
        reach_timeout_s: see `ModelManager`.
        tls_config: a checked SSLConfig message (`ssl_config.read_ssl_config`) or None (plain text):
            TLS on the gRPC port (mutual TLS with client_verify) and HTTPS on the REST port.
        request_log_max_file_bytes, request_log_queue_size: see `request_logger.RequestLogger`
            (the configs' logging_config entries say what is logged where).
        rest_options: rest.RestOptions, the REST port's bounds (threads, connections, deadlines).
    """

    def __init__(
        self,
        configs,
        host="127.0.0.1",
        port=8500,
        rest_api_port=8501,
        poll_seconds=1.0,
        batching_options=None,
        limits=tensors.Limits(),
        max_request_bytes=64 << 20,
        grpc_max_threads=16,
        prefer_tflite_model=False,
        litert_threads=0,
        max_num_load_retries=MAX_NUM_LOAD_RETRIES,
        load_retry_interval_s=LOAD_RETRY_INTERVAL_S,
        config_file="",
        config_poll_seconds=0.0,
        reach_timeout_s=REACH_TIMEOUT_S,
        tls_config=None,
        request_log_max_file_bytes=request_logger.DEFAULT_MAX_FILE_BYTES,
        request_log_queue_size=request_logger.DEFAULT_QUEUE_SIZE,
        rest_options=RestOptions(),
    ):
        self.metrics = Metrics()
        self.request_log = request_logger.RequestLogger(
            self.metrics, request_log_max_file_bytes, request_log_queue_size
        )
        self.request_log.update(configs)
        self._config_file, self._config_poll_seconds = config_file, config_poll_seconds
        self._applied_config = [c.SerializeToString(deterministic=True) for c in configs]
        self._unapplied = None  # lines of ModelManager.unapplied after the last poll; None: unknown
        self._reload_error = None  # the last poll's reload error, logged once
        self._config_stop = threading.Event()
        self._config_thread = None
        self.health = health.HealthServicer()
        self.manager = ModelManager(
            configs,
            poll_seconds,
            on_loaded=self._warmup,
            on_change=self._update_health,
            prefer_tflite_model=prefer_tflite_model,
            litert_threads=litert_threads,
            max_num_load_retries=max_num_load_retries,
            load_retry_interval_s=load_retry_interval_s,
            reach_timeout_s=reach_timeout_s,
        )
        self.service = InferenceService(
            self.manager, limits, batching_options, self.metrics, self.request_log
        )
        options = [
            ("grpc.max_receive_message_length", max_request_bytes),
            ("grpc.max_send_message_length", -1),
        ]
        self.grpc_server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(grpc_max_threads),
            options=options,
            interceptors=[grpc_service.UndecodableRequests()],
        )
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            grpc_service.PredictionServicer(self.service), self.grpc_server
        )
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(
            grpc_service.ModelServicer(self.service), self.grpc_server
        )
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc_server)
        # Server reflection (grpcurl, Postman, reflection clients): the service files must be in
        # protobuf's default pool first (service_protos explains why the wheel cannot do it).
        reflection.enable_server_reflection(
            (*service_protos.register(), service_protos.HEALTH_SERVICE, reflection.SERVICE_NAME),
            self.grpc_server,
        )
        if tls_config is None:
            self.port = self.grpc_server.add_insecure_port(f"{host}:{port}")
        else:
            self.port = self.grpc_server.add_secure_port(
                f"{host}:{port}", ssl_config.grpc_credentials(tls_config)
            )
        if not self.port:
            raise OSError(f"cannot bind gRPC to {host}:{port}")
        self.rest = (
            RestServer(
                host,
                rest_api_port,
                RestApi(self.service, max_request_bytes),
                self.metrics,
                ssl_context=(
                    ssl_config.rest_ssl_context(tls_config) if tls_config is not None else None
                ),
                options=rest_options,
            )
            if rest_api_port
            else None
        )
        self._update_health()

    def _warmup(self, servable):
        self.service.warmup(servable)

    def _update_health(self):
        ok = self.manager.all_available()
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if ok
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", "tensorflow.serving.PredictionService", "tensorflow.serving.ModelService"):
            self.health.set(name, status)

    def start(self):
        self.grpc_server.start()
        if self.rest:
            self.rest.start()
        self.manager.start()
        if self._config_file and self._config_poll_seconds > 0:
            self._config_thread = threading.Thread(
                target=self._poll_config, name="config-poller", daemon=True
            )
            self._config_thread.start()
        return self

    def _poll_config(self):
        while not self._config_stop.wait(self._config_poll_seconds):
            self.reload_config_file()

    def reload_config_file(self):
        """Reads --model_config_file again and applies it (`InferenceService.reload`) when it
        changed, or when part of it was not in effect after the last poll (a failed reload, or
        `ModelManager.unapplied`: a label refused because its version was not loaded, a specific
        version or a model with no version on disk yet). TF Serving applies the file at every
        poll, so such parts take effect at the first poll after their versions load; here the
        same, without re-applying a config that is all in effect.

        Returns True when the config was applied; errors are logged (again only when they
        change), never raised.
        """
        try:
            configs = model_configs(model_config_file=self._config_file)
        except (ValueError, OSError, text_format.ParseError, errors.ServingError) as e:
            _LOG.error("could not read model config file %s: %s", self._config_file, e)
            return False
        serialized = [c.SerializeToString(deterministic=True) for c in configs]
        if serialized == self._applied_config:
            if self._unapplied is None:  # the config the server started with
                self._unapplied = self.manager.unapplied(configs)
            if not self._unapplied:
                return False
        else:
            self._applied_config = serialized
            _LOG.info("model config file %s changed: applying it", self._config_file)
        error = None
        try:
            self.service.reload(configs)
        except errors.ServingError as e:
            error = e.message
        if error is not None and error != self._reload_error:
            _LOG.error("model config file %s: %s", self._config_file, error)
        self._reload_error = error
        unapplied = self.manager.unapplied(configs) or ([error] if error else [])
        if unapplied and unapplied != self._unapplied:
            _LOG.info(
                "model config file %s: not in effect yet: %s; applied again at the next poll",
                self._config_file,
                "; ".join(unapplied),
            )
        elif not unapplied and self._unapplied:
            _LOG.info("model config file %s: all in effect", self._config_file)
        self._unapplied = unapplied
        return True

    def stop(self, grace=5.0):
        self._config_stop.set()
        if self._config_thread:
            self._config_thread.join(timeout=30)
        self.health.enter_graceful_shutdown()
        if self.rest:
            self.rest.stop()
        self.grpc_server.stop(grace).wait()
        self.request_log.stop()
        self.manager.stop()


def fail_usage(message: str):
    """Ends the program as a usage error: `serving.server: error: <message>` on one line of
    stderr and exit status 2 (`keras_bert.cli.fail_usage`; absl's UsageError would print the
    whole module docstring first)."""
    cli.fail_usage(message, program="serving.server")


def main(argv):
    if len(argv) > 1:  # "--enable_batching False": a boolean takes no separate value
        fail_usage(f"unexpected arguments: {' '.join(argv[1:])}")
    try:  # a path flag given empty (`cli.check_not_empty`): before anything starts
        cli.check_given_paths(_FLAGS, PATH_FLAGS)
    except ValueError as e:
        fail_usage(str(e))
    try:  # a flag that acts only with another that is not given: before anything starts
        flag_dependencies.check_flags("serving.server", _FLAGS)
    except flag_dependencies.MissingPartnerError as e:
        fail_usage(str(e))
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if _FLAGS.rest_api_port:
        raise_open_files_limit(_FLAGS.rest_api_max_connections)
    # TensorFlow's runtime set-up, at its first use: the first SavedModel load, or the first path
    # on a file system only TensorFlow reaches (gs://, s3:// with tensorflow_io among the custom
    # op modules). With --prefer_tflite_model and local paths, a server whose versions all hold a
    # model.tflite never loads it.
    servable.on_tensorflow_import(
        lambda: set_tensorflow_threads(
            _FLAGS.tensorflow_intra_op_parallelism, _FLAGS.tensorflow_inter_op_parallelism
        )
    )
    servable.on_tensorflow_import(
        lambda: import_custom_op_modules([m for m in _FLAGS.custom_op_modules if m])
    )
    start_paths = (_FLAGS.model_base_path, _FLAGS.model_config_file, _FLAGS.ssl_config_file)
    if not _FLAGS.prefer_tflite_model or any(fileio.scheme(p) for p in start_paths if p):
        servable.tensorflow()  # SavedModels or URIs ahead: set it up now
    tls_config = None
    if _FLAGS.ssl_config_file:
        try:
            tls_config = ssl_config.read_ssl_config(_FLAGS.ssl_config_file)
        except ssl_config.SSLConfigError as e:
            fail_usage(str(e))
    try:
        configs = model_configs(_FLAGS.model_name, _FLAGS.model_base_path, _FLAGS.model_config_file)
        batching_options = None
        if _FLAGS.enable_batching:
            batching_options = batching.BatchingOptions()
            if _FLAGS.batching_parameters_file:
                batching_options = batching.parse_batching_parameters(
                    fileio.read_user_text(_FLAGS.batching_parameters_file),
                    f"--batching_parameters_file {_FLAGS.batching_parameters_file}",
                )
            if _FLAGS.enable_large_batch_splitting:
                batching_options = dataclasses.replace(
                    batching_options, enable_large_batch_splitting=True
                )
    except (ValueError, OSError, text_format.ParseError) as e:
        fail_usage(str(e))
    limits = tensors.Limits(
        _FLAGS.max_request_batch_size,
        _FLAGS.max_text_length,
        tuple(_FLAGS.text_inputs),
        _FLAGS.max_request_elements,
    )
    server = ModelServer(
        configs,
        host=_FLAGS.host,
        port=_FLAGS.port,
        rest_api_port=_FLAGS.rest_api_port,
        poll_seconds=_FLAGS.file_system_poll_wait_seconds,
        batching_options=batching_options,
        limits=limits,
        max_request_bytes=_FLAGS.max_request_bytes,
        grpc_max_threads=_FLAGS.grpc_max_threads,
        prefer_tflite_model=_FLAGS.prefer_tflite_model,
        litert_threads=_FLAGS.tensorflow_intra_op_parallelism,
        max_num_load_retries=_FLAGS.max_num_load_retries,
        load_retry_interval_s=_FLAGS.load_retry_interval_micros / 1e6,
        config_file=_FLAGS.model_config_file,
        config_poll_seconds=_FLAGS.model_config_file_poll_wait_seconds,
        tls_config=tls_config,
        request_log_max_file_bytes=_FLAGS.request_log_max_file_bytes,
        request_log_queue_size=_FLAGS.request_log_queue_size,
        rest_options=RestOptions(
            num_threads=_FLAGS.rest_api_num_threads,
            max_connections=_FLAGS.rest_api_max_connections,
            idle_timeout_s=_FLAGS.rest_api_idle_timeout_seconds,
            body_timeout_s=_FLAGS.rest_api_body_timeout_seconds,
        ),
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    secure = ""
    if tls_config is not None:
        secure = " with TLS" + (
            " (client certificates required)" if tls_config.client_verify else ""
        )
    _LOG.info("Running gRPC ModelServer at %s:%d%s ...", _FLAGS.host, server.port, secure)
    if server.rest:
        scheme = "HTTPS" if tls_config is not None else "HTTP"
        _LOG.info("Exporting %s/REST API at %s:%d ...", scheme, _FLAGS.host, server.rest.port)
    stop.wait()
    _LOG.info("shutting down")
    server.stop()


if __name__ == "__main__":
    cli.run(main)
