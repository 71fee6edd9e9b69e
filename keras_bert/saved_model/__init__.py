"""Versioned SavedModel export of task models (SPEC section 7).

`versioning` (integer version layout, atomic publish, method names), `serving_module` (the base
of every task's signatures), `warmup` (TF Serving warmup records), `exporter.export_task` (what
`Task.export` runs) and one signatures module per task family (`classifier_signatures`, ...).
The command line is `python -m export`.
"""
