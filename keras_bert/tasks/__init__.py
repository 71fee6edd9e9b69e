"""Task models: an encoder, the preprocessor it was trained with, and what the task is.

`Task` (base), `TextClassifier` (classification and regression, one text or a pair), and
`load_task(path)`. Each predicts on raw strings and exports itself (`task.export(...)`).
"""

from keras_bert.tasks.loading import load_task
from keras_bert.tasks.multiple_choice import MultipleChoice
from keras_bert.tasks.span_question_answerer import SpanQuestionAnswerer
from keras_bert.tasks.task import Task
from keras_bert.tasks.text_classifier import TextClassifier
from keras_bert.tasks.token_classifier import TokenClassifier

__all__ = [
    "MultipleChoice",
    "SpanQuestionAnswerer",
    "Task",
    "TextClassifier",
    "TokenClassifier",
    "load_task",
]
