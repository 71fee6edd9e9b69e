"""Model management: a servable (a SavedModel or LiteRT version, its signatures) and the model
manager (which versions of which models are loaded, config reloads). Of serving/ it imports only
serving.wire."""
