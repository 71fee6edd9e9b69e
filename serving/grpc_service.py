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


class PredictionServicer(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, service):
        self._service = service

    def Predict(self, request, context):
        return _call(self._service.predict, request, context)

    def Classify(self, request, context):
        return _call(self._service.classify, request, context)

    def Regress(self, request, context):
        return _call(self._service.regress, request, context)

    def MultiInference(self, request, context):
        return _call(self._service.multi_inference, request, context)

    def GetModelMetadata(self, request, context):
        return _call(self._service.get_model_metadata, request, context)


class ModelServicer(model_service_pb2_grpc.ModelServiceServicer):
    """GetModelStatus and HandleReloadConfigRequest (a new model_config_list replaces the served
    models; see ModelManager.reload)."""

    def __init__(self, service):
        self._service = service

    def GetModelStatus(self, request, context):
        return _call(self._service.get_model_status, request, context)

    def HandleReloadConfigRequest(self, request, context):
        return _call(self._service.reload_config, request, context)
