"""A TensorFlow-Serving-compatible model server and client (SPEC section 8).

`python -m serving.server` speaks the `tensorflow.serving` gRPC protocol (PredictionService,
ModelService, gRPC health) and TensorFlow Serving's REST API, so clients and deployment configs move
unchanged to stock `tensorflow_model_server`. It serves any SavedModel from its signatures alone and
imports no `keras_bert` code. `python -m serving.client` sends text and prints predictions.
"""
