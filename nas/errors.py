"""The one exception type that means "the user gave us something wrong"."""


class NasError(Exception):
    """A problem with the user's input (space file, storage URL, study name...).

    The CLI prints it as a single `Error: ...` line and exits with status 2; anything else
    is a bug and keeps its traceback.
    """


class SearchInterrupted(Exception):
    """Ctrl-C or SIGTERM during a search: the running trial was failed and queued again."""
