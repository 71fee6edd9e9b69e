"""keras_bert.metrics: the scores of predictions against gold labels, as the benchmarks define
them: `classification` (GLUE's metrics and those of own classification / regression data, through
scikit-learn and scipy), `squad` (SQuAD v1.1 / v2.0 through the official evaluators of
tf-models-official) and `ner` (entity-level seqeval, conlleval's definition). Fine-tuning scores
its dev evaluations with them and the evidence pack (`keras_bert.evaluation`) builds its reports
on them; they take plain labels and predictions and load no model.
"""
