"""Search-space presets shipped with nas; `nas search NAME` finds them from any folder."""
