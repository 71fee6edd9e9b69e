"""Dispatch (KServe's data plane): one request, whichever front end it came through, checked and
run on a loaded version (inference), through the batch scheduler (batching). Imports
serving.models, serving.monitoring and serving.wire; the front ends (serving.protocol) import it."""
