"""What the trial loop does with Python's garbage collector between trials.

Every trial ends with a full collection (`keras.backend.clear_session(free_memory=True)` in
trial.py) to free its model. A full collection walks every object the collector tracks, and
two kinds of objects outlive every trial: what start-up made (modules, the dataset, the
study), and what TensorFlow 2.21 keeps of each traced `tf.function` (each trial's train and
evaluation graphs, about 25,000 Python objects for a `mobilenet` trial, held from TensorFlow's
C++ side so no collection can free them; tensorflow/tensorflow#124972). Walked after every
trial, they made that collection grow from 0.19 s to 0.91 s over 70 trials of the race
(benchmarks/memory.py measures it). Moving survivors into the permanent generation
(`gc.freeze`) keeps each collection to what the last trial made.

The cost: an object that survives a trial and later becomes unreachable *in a cycle* is never
collected (one without cycles is freed by reference counting as usual). Between trials the
survivors are the worker's long-lived state and the leaked graphs, so what that holds back is
small; benchmarks/memory.py compares the resident set size with and without.
"""

from __future__ import annotations

import gc


def freeze_survivors() -> None:
    """Collect what is garbage now, then keep everything still alive out of later collections."""
    # The collection first: a failed trial's exception and traceback form a cycle that holds
    # the trial's frames (and through them its model); freezing it would keep that forever.
    # It walks only what is not frozen yet, so it costs about what the last trial made.
    gc.collect()
    gc.freeze()
