"""The one version number: pyproject.toml reads it (setuptools' dynamic `attr`), `actors
--version` prints it, and `actors.__version__` re-exports it.

A module of its own, so printing the version imports nothing else (neither click nor
importlib.metadata, which together cost more than the rest of the CLI's start-up).
"""

__version__ = "0.1.0"
