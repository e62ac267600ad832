"""The `trials` strategy: every candidate trains its own network. Its space part is
`settings.py` (no settings of its own), its engine part `strategy.py`."""
