"""The ``tritonsmith`` command line (typer). ``main`` is the console entry point (``tritonsmith.cli:main``).

Layout: ``_app`` builds the app from one module per command (``optimize``, ``eval``, ``bench``, ``report``,
``profile``, ``memory``, ``search_web``); ``_common`` (consoles, paths, option choices), ``_interrupt``
(Ctrl-C) and ``_precheck`` (the reference check and size estimate) sit below them and import none of them.
"""

from tritonsmith.cli._app import app, main

__all__ = ["app", "main"]
