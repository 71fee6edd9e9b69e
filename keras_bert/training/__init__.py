"""Training helpers shared by fine-tuning and pretraining.

- `get_strategy(name, tpu=None)`: a `tf.distribute` strategy by name.
- `create_optimizer(...)`: the BERT optimizer (AdamW or LAMB, warmup + linear decay, clipping,
  gradient accumulation, loss scaling for float16).
- `set_mixed_precision(mode)`: the Keras dtype policy for "float32" | "mixed_float16" | "mixed_bfloat16".
- `standard_callbacks(...)`, `ResumableCheckpoint`, `resumable_fit(...)`: step checkpoints that
  survive SIGKILL, TensorBoard, progress bar.
- `trainer.run(family, args)`: the one fine-tuning driver of every task family
  (`keras_bert.training.families`: classification, squad, ner, swag, distillation), with one
  argument set (`keras_bert.training.args.FinetuneArgs`, flags generated from its fields);
  `recipe.run_recipe(family)`: a training recipe's whole command line.

Importing the package loads none of them (PEP 562): `keras_bert.training.flag_dependencies`
(read by `serving.server`) comes without Keras.
"""

import importlib

# Public name -> the module that defines it.
_PUBLIC = {
    "get_strategy": "keras_bert.training.strategy",
    "create_optimizer": "keras_bert.training.optimizer",
    "FusedAdamW": "keras_bert.training.optimizer",
    "WarmupLinearDecay": "keras_bert.training.optimizer",
    "set_mixed_precision": "keras_bert.training.optimizer",
    "standard_callbacks": "keras_bert.training.callbacks",
    "ResumableCheckpoint": "keras_bert.training.callbacks",
    "resumable_fit": "keras_bert.training.fit",
}


def __getattr__(name):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'keras_bert.training' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))


__all__ = list(_PUBLIC)
