"""Layers whose saved config is their constructor's arguments, listed once: in the signature.

Keras rebuilds a layer from `get_config()` with `cls(**config)`, so the config must name every
constructor argument. Writing each one three times (signature, `self.x = x`, `get_config`) lets
a new argument be forgotten in the saved config; `ConfigFromArguments` reads the names from the
signature instead.
"""

import inspect


class ConfigFromArguments:
    """Mixin for a Keras layer or model: `get_config` returns the constructor's arguments.

    `__init__` calls `self.keep_arguments(locals())` after `super().__init__(**kwargs)`: every
    named parameter of the constructor (not `self`, not `**kwargs`) becomes an attribute of the
    same name, and `get_config` returns them beside Keras' own fields (name, dtype, trainable).
    """

    @classmethod
    def argument_names(cls) -> tuple:
        """The constructor's named parameters, in signature order."""
        parameters = inspect.signature(cls.__init__).parameters.values()
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        return tuple(p.name for p in parameters if p.name != "self" and p.kind in kinds)

    @classmethod
    def from_bert_config(cls, bert_config, **kwargs):
        """The layer of a `BertConfig`: each constructor argument from the config field of the
        same name; `kwargs` (name, dtype) pass to the constructor."""
        return cls(**{name: getattr(bert_config, name) for name in cls.argument_names()}, **kwargs)

    def keep_arguments(self, values: dict) -> None:
        """Stores each constructor argument of `values` (the constructor's `locals()`)."""
        for name in self.argument_names():
            setattr(self, name, values[name])

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in self.argument_names()})
        return config


class BuildsFromArguments:
    """Mixin for a layer or model whose every variable's shape follows from its constructor
    arguments alone: a saved one is rebuilt by `build()` with no input shape."""

    def get_build_config(self):
        return {"built": True}

    def build_from_config(self, config):
        self.build()
