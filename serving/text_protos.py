"""The one way the server parses a text-format proto that a user wrote: --model_config_file,
--batching_parameters_file and --ssl_config_file.

`text_format.Parse` is recursive Python. An `Any` field (ModelServerConfig's
custom_model_config) may name any message type registered in the process, recursive ones
included (tensorflow.StructuredValue once TensorFlow is loaded), so a file can nest messages
until the interpreter's recursion limit ends the parse with a RecursionError, which no caller
expects. Here that is a `text_format.ParseError` like any other bad text (TF Serving's C++ parser
stops at 100 levels).
"""

from google.protobuf import text_format


def parse(text: str, message):
    """`text_format.Parse(text, message)`: fills and returns `message`.

    Raises:
        text_format.ParseError: text that is not a text-format `message`, including messages
            nested deeper than the parser can recurse.
    """
    try:
        return text_format.Parse(text, message)
    except RecursionError:
        raise text_format.ParseError(
            f"messages nested too deeply for a text-format {message.DESCRIPTOR.full_name}"
        ) from None
