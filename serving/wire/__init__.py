"""Wire formats, the bottom layer of serving/: tensors as protos, numpy and TF Serving's JSON,
dtypes, TensorFlow Serving's protos (loaded without TensorFlow's runtime), text protos, TFRecords,
and the one error type with its gRPC code and HTTP status. Imports nothing else of serving/."""
