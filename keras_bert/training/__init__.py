"""Training helpers shared by fine-tuning and pretraining.

- `get_strategy(name, tpu=None)`: a `tf.distribute` strategy by name.
- `create_optimizer(...)`: the BERT optimizer (AdamW or LAMB, warmup + linear decay, clipping,
  gradient accumulation, loss scaling for float16).
- `set_mixed_precision(mode)`: the Keras dtype policy for "float32" | "mixed_float16" | "mixed_bfloat16".
- `standard_callbacks(...)`, `ResumableCheckpoint`, `resumable_fit(...)`: step checkpoints that
  survive SIGKILL, TensorBoard, progress bar.
- `driver.run(family, args)`: the one fine-tuning driver of every task family
  (`keras_bert.training.families`: classification, squad, ner, swag, distillation), with one
  argument set (`keras_bert.training.args.FinetuneArgs`, flags generated from its fields).
"""

from keras_bert.training.callbacks import ResumableCheckpoint, standard_callbacks
from keras_bert.training.fit import resumable_fit
from keras_bert.training.optimizer import (
    FusedAdamW,
    WarmupLinearDecay,
    create_optimizer,
    set_mixed_precision,
)
from keras_bert.training.strategy import get_strategy

__all__ = [
    "get_strategy",
    "create_optimizer",
    "FusedAdamW",
    "WarmupLinearDecay",
    "set_mixed_precision",
    "standard_callbacks",
    "ResumableCheckpoint",
    "resumable_fit",
]
