"""The task families of the one fine-tuning driver (`keras_bert.training.trainer`), one module
each, a `keras_bert.training.family.Family` subclass: what the family reads, builds, evaluates and
writes; everything else is the trainer's.

- `classification`: GLUE and own-data (pair) classification / regression (`TextClassifier`);
- `squad`: SQuAD v1.1 / v2.0 span question answering (`SpanQuestionAnswerer`);
- `ner`: CoNLL-2003 named entities (`TokenClassifier`);
- `swag`: SWAG multiple choice (`MultipleChoice`);
- `distillation`: a smaller student of a fine-tuned classifier (`TextClassifier`).
"""
