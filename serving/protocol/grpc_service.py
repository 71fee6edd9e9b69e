"""gRPC front end: tensorflow.serving PredictionService and ModelService servicers, and the
interceptor that answers request bytes which do not parse INVALID_ARGUMENT (`UndecodableRequests`).

The servicers come from the official `tensorflow-serving-api` stubs; each call delegates to
InferenceService and turns a ServingError into the matching gRPC status and message.
"""

import grpc
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from serving.wire import errors


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


class UndecodableRequests(grpc.ServerInterceptor):
    """Request bytes that do not parse as the method's message are INVALID_ARGUMENT naming the
    message type, for every unary-request method (ours, health checking): gRPC Python answers
    them INTERNAL "Exception deserializing request!", which blames the server for a client's
    bytes (found by mutating the wire bytes of valid requests)."""

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.request_streaming or handler.request_deserializer is None:
            return handler
        parse = handler.request_deserializer
        message_type = getattr(getattr(parse, "__self__", None), "DESCRIPTOR", None)
        name = message_type.full_name if message_type is not None else "request message"

        def parsed(data, context):
            try:
                return parse(data)
            except Exception as e:  # DecodeError, or a nesting past protobuf's recursion limit
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"request is not a valid {name} ({type(e).__name__}: {e})",
                )

        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                lambda data, context: handler.unary_unary(parsed(data, context), context),
                response_serializer=handler.response_serializer,
            )
        return grpc.unary_stream_rpc_method_handler(
            lambda data, context: handler.unary_stream(parsed(data, context), context),
            response_serializer=handler.response_serializer,
        )
