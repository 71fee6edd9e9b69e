"""The FileDescriptors of TF Serving's two gRPC services, registered in protobuf's default pool.

gRPC server reflection answers from protobuf's default descriptor pool, so
`tensorflow_serving/apis/prediction_service.proto` and `model_service.proto` must be there. The
tensorflow-serving-api 2.20 wheel ships their `_pb2` modules in the old generated-code style
(`DESCRIPTOR.has_options = True`), which protobuf >= 4 (upb) refuses: importing them raises
AttributeError, so the services never reach the pool. The messages they use come from modules that
import fine (predict_pb2, get_model_status_pb2, ...), and the `_pb2_grpc` stubs do not need the
service modules. `register()` adds the two service files, field for field as the wheel's serialized
FileDescriptorProtos (the test compares the bytes), after their dependencies.

Source: tensorflow_serving/apis/prediction_service.proto and model_service.proto (TF Serving 2.20).
"""

import importlib

from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_health.v1 import health_pb2  # noqa: F401 - registers grpc.health.v1.Health

PREDICTION_SERVICE = "tensorflow.serving.PredictionService"
MODEL_SERVICE = "tensorflow.serving.ModelService"
HEALTH_SERVICE = "grpc.health.v1.Health"

_APIS = "tensorflow_serving/apis/"
_SERVICES = {
    "prediction_service.proto": (
        ["classification", "get_model_metadata", "inference", "predict", "regression"],
        "PredictionService",
        [
            ("Classify", "ClassificationRequest", "ClassificationResponse"),
            ("Regress", "RegressionRequest", "RegressionResponse"),
            ("Predict", "PredictRequest", "PredictResponse"),
            ("MultiInference", "MultiInferenceRequest", "MultiInferenceResponse"),
            ("GetModelMetadata", "GetModelMetadataRequest", "GetModelMetadataResponse"),
        ],
    ),
    "model_service.proto": (
        ["get_model_status", "model_management"],
        "ModelService",
        [
            ("GetModelStatus", "GetModelStatusRequest", "GetModelStatusResponse"),
            ("HandleReloadConfigRequest", "ReloadConfigRequest", "ReloadConfigResponse"),
        ],
    ),
}


def _import_dependencies():
    """Imports the `_pb2` module of each file that a service file depends on (the lists in
    `_SERVICES`): each import registers its messages in the default pool, which must hold them
    before a service file that refers to them can be added."""
    for dependencies, _, _ in _SERVICES.values():
        for name in dependencies:
            importlib.import_module(f"tensorflow_serving.apis.{name}_pb2")


_import_dependencies()


def file_descriptor_proto(filename: str) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of `filename` ("prediction_service.proto" or "model_service.proto")."""
    dependencies, service_name, methods = _SERVICES[filename]
    proto = descriptor_pb2.FileDescriptorProto(
        name=_APIS + filename,
        package="tensorflow.serving",
        dependency=[f"{_APIS}{d}.proto" for d in dependencies],
        syntax="proto3",
    )
    service = proto.service.add(name=service_name)
    for name, request, response in methods:
        service.method.add(
            name=name,
            input_type=f".tensorflow.serving.{request}",
            output_type=f".tensorflow.serving.{response}",
        )
    proto.options.cc_enable_arenas = True
    return proto


def register(pool=None) -> list:
    """Adds both service files to `pool` (default: protobuf's default pool) unless already there.

    Returns:
        the full names of the services now resolvable: [PREDICTION_SERVICE, MODEL_SERVICE].
    Raises:
        TypeError: the pool holds a different file under the same name (conflicting definitions).
    """
    pool = pool or descriptor_pool.Default()
    for filename in _SERVICES:
        try:
            pool.FindFileByName(_APIS + filename)
        except KeyError:
            pool.AddSerializedFile(file_descriptor_proto(filename).SerializeToString())
    return [pool.FindServiceByName(name).full_name for name in (PREDICTION_SERVICE, MODEL_SERVICE)]
