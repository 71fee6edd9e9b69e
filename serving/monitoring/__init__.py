"""Monitoring: the server's Prometheus metrics (ours and stock TF Serving's names) and the request
logger. Of serving/ it imports only serving.wire."""
