"""`keras_bert.fileio` for the server, without the rest of keras_bert.

The server reads base paths and config files through the project's one file-access module
(SPEC section 6a), yet imports no model code (SPEC section 3): `import keras_bert.fileio` would
first run `keras_bert/__init__.py`, which loads Keras and every task. So the module file is loaded
on its own and registered under its own name, `keras_bert.fileio`: a process that also imports
keras_bert (a test, a notebook) shares the one module object, and patches to it reach the server.
"""

from serving.module_files import load_project_module

fileio = load_project_module("keras_bert.fileio")
