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


def parse(text: str, message, where: str = ""):
    """`text_format.Parse(text, message)`: fills and returns `message`.

    Args:
        text: the file's text.
        message: an empty message of the file's type.
        where: the file as the user named it, to start each error message with (`"<where>: not
            a text-format <type>: <problem>"`); "" leaves the parser's own messages as they are.

    Raises:
        text_format.ParseError: text that is not a text-format `message`, including messages
            nested deeper than the parser can recurse ("messages nested too deeply").
    """
    try:
        return text_format.Parse(text, message)
    except RecursionError:
        problem = "messages nested too deeply"
    except text_format.ParseError as e:
        if not where:
            raise
        problem = str(e)
    prefix = f"{where}: " if where else ""
    raise text_format.ParseError(
        f"{prefix}not a text-format {message.DESCRIPTOR.full_name}: {problem}"
    ) from None
