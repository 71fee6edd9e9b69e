"""keras_bert.evaluation."""
