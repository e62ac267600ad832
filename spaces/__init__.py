"""Search-space presets shipped with nas; `nas search NAME` finds them from any folder."""

from importlib import resources


def preset_names() -> list[str]:
    """The presets by name: this folder's YAML files (not `reference/`'s published networks)."""
    return sorted(p.name[:-5] for p in resources.files(__name__).iterdir() if p.name.endswith(".yaml"))
