"""Protocol front ends (KServe's protocol/): the gRPC services and TensorFlow Serving's REST API,
each turning its wire format into calls of serving.dispatch."""
