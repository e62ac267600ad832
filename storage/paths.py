"""Names that become paths. A study name, a trial number or a file name taken from the user
or from a shared database becomes a file or folder under a root nas owns (the artifact
folder, an export folder); these checks keep every such path one plain name under its root,
so no value can write outside it (`..`, `/etc`, a NUL, a link inside that points out).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from nas.errors import NasError

# The same rule as a space file's `name` (search/space/spec.py): ASCII letters, digits and
# `_.-`, starting with a letter or digit, so never '.', '..', empty, hidden or a separator.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}"
NAME_RULE = "1 to 100 letters, digits, '_', '.' or '-', starting with a letter or digit"


def _shown(value: object) -> str:
    """The value on one line (repr shows a NUL or a newline), shortened when very long."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def safe_name(value: object, what: str) -> str:
    """`value` if it can be one file or folder name; NasError naming `what` otherwise."""
    # fullmatch, not `^...$`: `$` would also match before a trailing newline.
    if isinstance(value, str) and re.fullmatch(NAME_PATTERN, value):
        return value
    raise NasError(f"{what} {_shown(value)} cannot be a file name: use {NAME_RULE}")


def trial_number(value: object) -> int:
    """A trial number that can be part of a file name: a non-negative int (not a bool)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise NasError(f"trial number {_shown(value)} cannot be part of a file name: use an integer >= 0")


def contained(root: Path, *names: str) -> Path:
    """root/names..., each a safe name, refused unless it resolves strictly inside the resolved
    root: the root itself may be a link (a shared mount), a link inside that points out may not."""
    path = root.joinpath(*(safe_name(name, "path component") for name in names))
    base, resolved = root.resolve(), path.resolve()
    if base not in resolved.parents:
        raise NasError(f"{path} leads to {resolved}, not inside {base}; nas writes only inside that folder")
    return path


def own_folder(root: Path, name: str) -> Path:
    """The folder root/name, created if missing, refused if another entry of root is the same
    folder: on a case-insensitive filesystem `Foo` and `foo` are one folder (and so is a link
    to it), and two studies sharing one would overwrite each other's trial-N files."""
    folder = contained(root, name)
    if folder.exists():
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.name != name and entry.is_dir() and os.path.samefile(entry.path, folder):
                    raise NasError(
                        f"folder {folder} is also {entry.path} (names that differ only in case on this "
                        f"filesystem, or a link); '{name}' and '{entry.name}' cannot share it"
                    )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NasError(f"cannot create folder {folder} ({exc.strerror or exc})") from None
    return folder
