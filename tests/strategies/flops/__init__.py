"""A third strategy, made only to show what adding one takes (tests/strategies/test_adding.py):
random architectures, each scored by its FLOPs instead of a training. Its space part is
`settings.py`, its engine part `strategy.py`; it is registered with one line."""
