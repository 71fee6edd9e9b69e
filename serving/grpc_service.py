"""gRPC front end: tensorflow.serving PredictionService and ModelService servicers.

The servicers come from the official `tensorflow-serving-api` stubs; each call delegates to
InferenceService and turns a ServingError into the matching gRPC status and message.
"""

from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from serving import errors


def _call(fn, request, context):
    try:
        return fn(request)
    except errors.ServingError as e:
        context.abort(e.code, e.message)


def _delegate(name):
    """A servicer method that answers with InferenceService's method `name` (looked up on each
    call), through `_call`: every RPC of both services is that one delegation."""

    def method(self, request, context):
        return _call(getattr(self._service, name), request, context)

    method.__name__ = name
    return method


class _Delegating:
    """Holds the InferenceService that the `_delegate` methods call."""

    def __init__(self, service):
        self._service = service


class PredictionServicer(_Delegating, prediction_service_pb2_grpc.PredictionServiceServicer):
    Predict = _delegate("predict")
    Classify = _delegate("classify")
    Regress = _delegate("regress")
    MultiInference = _delegate("multi_inference")
    GetModelMetadata = _delegate("get_model_metadata")


class ModelServicer(_Delegating, model_service_pb2_grpc.ModelServiceServicer):
    """GetModelStatus and HandleReloadConfigRequest (a new model_config_list replaces the served
    models; see ModelManager.reload)."""

    GetModelStatus = _delegate("get_model_status")
    HandleReloadConfigRequest = _delegate("reload_config")
