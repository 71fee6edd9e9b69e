"""One error type carrying a gRPC status code, and TensorFlow Serving's gRPC -> HTTP mapping."""

import grpc

# tensorflow_serving/model_servers/http_rest_api_handler / http_server.cc ToHTTPStatusCode.
_HTTP_STATUS = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}


class ServingError(Exception):
    """A request failed with a gRPC status `code` (grpc.StatusCode) and a message naming the cause."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return http_status(self.code)

    def __str__(self):
        return f"{self.code.name}: {self.message}"


def http_status(code: grpc.StatusCode) -> int:
    """HTTP status TensorFlow Serving's REST API returns for a gRPC status code."""
    return _HTTP_STATUS.get(code, 500)


def invalid_argument(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.NOT_FOUND, message)


def failed_precondition(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.FAILED_PRECONDITION, message)


def resource_exhausted(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.RESOURCE_EXHAUSTED, message)


def unavailable(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.UNAVAILABLE, message)


def from_tf_error(error: Exception) -> ServingError:
    """Maps an exception raised while running a model to a ServingError.

    tf.errors.InvalidArgumentError (e.g. an id beyond the embedding table, a sequence longer than
    the position table) is the caller's fault: INVALID_ARGUMENT. Anything else is INTERNAL.
    """
    import tensorflow as tf  # local: keeps this module importable without TF

    if isinstance(error, ServingError):
        return error
    code = grpc.StatusCode.INTERNAL
    if isinstance(error, tf.errors.OpError):
        mapping = {
            tf.errors.InvalidArgumentError: grpc.StatusCode.INVALID_ARGUMENT,
            tf.errors.OutOfRangeError: grpc.StatusCode.OUT_OF_RANGE,
            tf.errors.ResourceExhaustedError: grpc.StatusCode.RESOURCE_EXHAUSTED,
            tf.errors.FailedPreconditionError: grpc.StatusCode.FAILED_PRECONDITION,
            tf.errors.NotFoundError: grpc.StatusCode.NOT_FOUND,
        }
        code = mapping.get(type(error), grpc.StatusCode.INTERNAL)
        message = error.message
    elif isinstance(error, (TypeError, ValueError)):
        code, message = grpc.StatusCode.INVALID_ARGUMENT, str(error)
    else:
        message = f"{type(error).__name__}: {error}"
    return ServingError(code, message)
