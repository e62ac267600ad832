"""The `nas` command line: the app and its command groups, options, consoles, live displays."""

from nas.search.cli.app import app, main

__all__ = ["app", "main"]
