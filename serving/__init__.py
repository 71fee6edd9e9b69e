"""A TensorFlow-Serving-compatible model server and client (SPEC section 8).

`python -m serving.server` speaks the `tensorflow.serving` gRPC protocol (PredictionService,
ModelService, gRPC health) and TensorFlow Serving's REST API, so clients and deployment configs move
unchanged to stock `tensorflow_model_server`. It serves any SavedModel from its signatures alone and
imports no `keras_bert` code. `python -m serving.client` sends text and prints predictions.
"""

# TensorFlow's proto packages (`tensorflow.core.*`, which the tensorflow_serving protos import)
# become importable without running `tensorflow/__init__.py`, before any module of this package
# imports them: the client never loads TensorFlow's runtime, and the server loads it only to
# serve a SavedModel (`serving.wire.protos`, `serving.models.servable.tensorflow`).
from serving.wire import protos as _protos  # noqa: F401
