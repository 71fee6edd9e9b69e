"""Fuzz targets, their seed corpora and the runner for coverage-guided runs (atheris)."""
