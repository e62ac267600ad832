"""`nas search --workers N`: the parent that prepares the study, runs N worker processes and
shows them in one view.

Workers are fresh interpreters running `nas worker` (never forks of a process that has
initialised TensorFlow or CUDA), each with its placement in the environment; they report
over a pipe as JSON lines. The parent imports no TensorFlow. A worker that exits to bound
its memory (recycling) or dies is replaced; the study's database keeps everything else.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

import optuna
from optuna.trial import TrialState

from nas.errors import NasError, SearchInterrupted
from nas.search.data import check_source
from nas.search.engine import (
    SearchEvents,
    SearchOptions,
    counts,
    ended_normally,
    make_sampler,
    prepare_study,
    recover_orphans,
    restrict_to_device,
)
from nas.search.records import PipeEvent, StoppedBy
from nas.search.space import SearchSpace
from nas.search.strategies import strategy_for
from nas.search.workers.placement import Placement
from nas.storage import ENV_VAR as PROFILE_ENV
from nas.storage import GRACE_PERIOD_S

# A slot whose worker dies this many times in a row without finishing a trial is given up:
# something is wrong with the machine or the space, and restarting would loop forever.
MAX_CRASHES = 3


@dataclass
class Slot:
    placement: Placement
    process: subprocess.Popen[bytes] | None = None
    trial: int | None = None
    phase: str = "starting"
    done: int = 0
    failed: int = 0
    started: int = 0  # processes started in this slot (recycling and restarts)
    crashes: int = 0
    outcome: dict[str, Any] | None = None
    error: str | None = None
    eof: bool = False
    stderr: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=20))

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def live(self) -> bool:
        return self.process is not None and not (self.eof and self.process.poll() is not None)


class PoolView:
    """What the parent's display must offer (display_pool.PoolLiveView implements it)."""

    def message(self, text: str) -> None: ...
    def start(self, study: str, budget: int, finished: int, slots: list[Slot]) -> None: ...
    def update(self, slot: Slot, event: dict[str, Any]) -> None: ...
    def stop(self) -> None: ...


class _ViewEvents(SearchEvents):
    """prepare_study's messages go to the pool view."""

    def __init__(self, view: PoolView) -> None:
        self.view = view

    def message(self, text: str) -> None:
        self.view.message(text)


@dataclass(frozen=True)
class PoolOutcome:
    finished: int
    budget: int
    ran: int
    failed: int
    stopped_by: StoppedBy


class WorkerPool:
    def __init__(
        self,
        options: SearchOptions,
        placements: list[Placement],
        view: PoolView,
        *,
        recycle_after: int | None,
        debug: bool = False,
    ) -> None:
        self.options = options
        self.slots = [Slot(p) for p in placements]
        self.view = view
        self.recycle_after = recycle_after
        self.debug = debug
        self.events: queue.Queue[tuple[Slot, dict[str, Any]]] = queue.Queue()
        self.interrupts = 0
        self.stopping = False
        self.study: optuna.Study | None = None
        self.started = time.monotonic()

    # --- processes -------------------------------------------------------------------
    def worker_env(self, slot: Slot) -> dict[str, str]:
        """A worker's environment: its placement, the study's storage and artifacts."""
        env = dict(os.environ) | slot.placement.env() | {"NAS_STORAGE": self.options.storage.raw}
        if not self.options.cache:
            env.pop(PROFILE_ENV, None)  # --no-cache: no device profile either
        if self.options.artifacts:
            env["NAS_ARTIFACTS"] = self.options.artifacts
        return env

    def _start(self, slot: Slot) -> None:
        read_fd, write_fd = os.pipe()
        env = self.worker_env(slot)
        command = [sys.executable, "-m", "nas", "worker", "--study", self.options.study_name]
        command += ["--report-fd", str(write_fd), "--recycle-after", str(self.recycle_after or 0)]
        if self.options.timeout is not None:
            # What is left of the search's timeout: a replacement worker must not start afresh.
            left = max(0.0, self.options.timeout - (time.monotonic() - self.started))
            command += ["--timeout", f"{left:.1f}"]
        if self.debug:
            command.append("--debug")
        # The password travels in the environment, never on a command line `ps` shows.
        # A session of its own: a terminal's Ctrl-C reaches only the parent, which forwards it
        # once per press (otherwise every worker would see it twice).
        slot.process = subprocess.Popen(
            command,
            env=env,
            pass_fds=(write_fd,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        os.close(write_fd)
        slot.started += 1
        slot.eof, slot.outcome, slot.trial, slot.phase = False, None, None, "starting"
        process = slot.process
        assert process.stderr is not None
        threading.Thread(target=self._read_events, args=(slot, read_fd), daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(slot, process.stderr), daemon=True).start()
        self.view.update(slot, {"event": PipeEvent.SPAWNED})

    def _read_events(self, slot: Slot, fd: int) -> None:
        with os.fdopen(fd, encoding="utf-8") as pipe:
            for line in pipe:
                try:
                    self.events.put((slot, json.loads(line)))
                except json.JSONDecodeError:
                    slot.stderr.append(line.rstrip())
        self.events.put((slot, {"event": PipeEvent.EOF}))

    def _read_stderr(self, slot: Slot, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip()
            slot.stderr.append(line)
            if self.debug:
                self.events.put((slot, {"event": PipeEvent.MESSAGE, "text": line}))

    def _signal_all(self, signum: int) -> None:
        for slot in self.slots:
            if slot.process is not None and slot.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    slot.process.send_signal(signum)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.interrupts += 1
        self.stopping = True
        if self.interrupts == 1:
            self.view.message("Stopping: running trials will finish, no new ones start (Ctrl-C again: stop now).")
            self._signal_all(signal.SIGINT)
        else:
            self.view.message("Stopping now: running trials are failed and queued again.")
            # Stop-now travels as its own signal: a second SIGINT can reach a worker inside a
            # long TensorFlow call while the first is still pending, and the two merge into
            # one "let the trial finish". SIGTERM means "stop now" to a worker either way.
            self._signal_all(signal.SIGTERM)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.stopping = True
        self.interrupts = max(self.interrupts, 2)
        self._signal_all(signal.SIGTERM)

    # --- events ------------------------------------------------------------------------
    def _handle(self, slot: Slot, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == PipeEvent.EOF:
            slot.eof = True
            return
        if kind == PipeEvent.TRIAL_STARTED:
            slot.trial, slot.phase = event["number"], "starting"
        elif kind == PipeEvent.PHASE:
            slot.phase = event["text"]
        elif kind == PipeEvent.TRIAL_FINISHED:
            if event["report"]["complete"]:
                slot.done += 1
                slot.crashes = 0
            else:
                slot.failed += 1
            slot.trial, slot.phase = None, "idle"
        elif kind == PipeEvent.OUTCOME:
            slot.outcome = event
        elif kind == PipeEvent.ERROR:
            slot.error = event["text"]
        self.view.update(slot, event)

    def _finished_process(self, slot: Slot) -> None:
        """The worker in `slot` has exited; decide whether the slot goes on."""
        assert slot.process is not None
        code = slot.process.returncode
        stopped_by = (slot.outcome or {}).get("stopped_by")
        if slot.error is not None:
            self._stop_others(f"worker {slot.placement.index}: {slot.error}")
            slot.process = None
            return
        if stopped_by == StoppedBy.FAILURES:
            self._stop_others("a worker stopped after too many failed trials in a row")
        if stopped_by == StoppedBy.RECYCLE and not self.stopping:
            if not self._budget_taken():
                self._start(slot)
                return
            slot.process = None  # the live workers finish what is left: a fresh one would only start and exit
            return
        if stopped_by is None:
            how = f"signal {-code}" if code < 0 else f"exit status {code}"
            last = next((line for line in reversed(slot.stderr) if line.strip()), "")
            self.view.message(
                f"worker {slot.placement.index} (pid {slot.pid}) ended with {how}" + (f": {last}" if last else "")
            )
            slot.crashes += 1
            if not self.stopping and slot.crashes < MAX_CRASHES:
                self._start(slot)
                return
        slot.process = None

    def _budget_taken(self) -> bool:
        """Whether finished and running trials already make up the budget. A worker whose
        running trial fails goes on to the next one itself; one that dies is replaced."""
        assert self.study is not None
        finished, running = counts(self.study)
        return finished + running >= self.options.trials

    def _stop_others(self, why: str) -> None:
        if not self.stopping:
            self.view.message(f"Stopping the other workers: {why}")
            self.stopping = True
            self._signal_all(signal.SIGINT)

    # --- the run -----------------------------------------------------------------------
    def run(self, space: SearchSpace) -> PoolOutcome:
        make_sampler(self.options.sampler, self.options.seed)
        if all(s.placement.gpu is None for s in self.slots):
            # CPU workers: the precision check needs no TensorFlow (GPU workers check their own).
            restrict_to_device(space, {"kind": "cpu"}, _ViewEvents(self.view))
        check_source(space.spec.dataset)
        _, study = prepare_study(space, self.options, _ViewEvents(self.view))
        self.study = study
        finished, _ = counts(study)
        self.view.start(study.study_name, self.options.trials, finished, self.slots)
        if finished >= self.options.trials:
            self.view.stop()
            return PoolOutcome(finished, self.options.trials, 0, 0, StoppedBy.BUDGET)
        previous = signal.signal(signal.SIGINT, self._on_sigint), signal.signal(signal.SIGTERM, self._on_sigterm)
        try:
            for slot in self.slots:
                self._start(slot)
            while any(slot.process is not None for slot in self.slots):
                try:
                    slot, event = self.events.get(timeout=0.5)
                    self._handle(slot, event)
                except queue.Empty:
                    pass
                for slot in self.slots:
                    if slot.process is not None and slot.eof and slot.process.poll() is not None:
                        self._finished_process(slot)
        finally:
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])
            self.view.stop()
        return self._outcome(study)

    def finish(self, space: SearchSpace, stopped_by: StoppedBy) -> None:
        """The strategy's after-search steps (engine/strategy.py) after a search that ended
        normally: this parent loads no TensorFlow, so they run in one more worker process on
        the first worker's device, and their lines come over the pipe as a worker's do. A
        failure is a warning: the search itself is complete and saved."""
        if not ended_normally(stopped_by) or not strategy_for(space).after_search(space):
            return
        read_fd, write_fd = os.pipe()
        command = [sys.executable, "-m", "nas", "worker", "--study", self.options.study_name, "--finish"]
        command += ["--report-fd", str(write_fd)] + (["--debug"] if self.debug else [])
        process = subprocess.Popen(
            command,
            env=self.worker_env(self.slots[0]),
            pass_fds=(write_fd,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        os.close(write_fd)
        assert process.stderr is not None
        stderr: collections.deque[str] = collections.deque(maxlen=20)
        stream = process.stderr

        def read_stderr() -> None:
            stderr.extend(raw.decode(errors="replace").rstrip() for raw in stream)

        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        error = None
        with os.fdopen(read_fd, encoding="utf-8") as pipe:
            for line in pipe:
                with contextlib.suppress(json.JSONDecodeError):
                    event = json.loads(line)
                    if event.get("event") == PipeEvent.MESSAGE:
                        self.view.message(event["text"])
                    elif event.get("event") == PipeEvent.ERROR:
                        error = event["text"]
        code = process.wait()
        reader.join(timeout=5)
        if error is None and code != 0:
            error = next((line for line in reversed(stderr) if line.strip()), f"exit status {code}")
        if error is not None:
            again = " and ".join(
                f"`{s.again.format(study=self.options.study_name)}`" for s in strategy_for(space).after_search(space)
            )
            self.view.message(f"Warning: the after-search steps failed ({error}); run {again}")

    def _outcome(self, study: optuna.Study) -> PoolOutcome:
        # Workers that died without cleaning up (kill -9, crash) leave RUNNING trials: fail and
        # queue them now, so the study never keeps a RUNNING trial without a worker.
        for line in recover_orphans(study, GRACE_PERIOD_S):
            self.view.message(line)
        finished, _ = counts(study)
        ran = sum(s.done for s in self.slots)
        failed = sum(s.failed for s in self.slots)
        errors = [s.error for s in self.slots if s.error]
        if errors:
            raise NasError(errors[0])
        reasons = {(s.outcome or {}).get("stopped_by") for s in self.slots}
        if StoppedBy.STOPPED in reasons:
            queued = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
            raise SearchInterrupted(
                f"running trials were stopped and queued again ({queued} queued); {finished} finished trials are saved."
            )
        if StoppedBy.FAILURES in reasons:
            stopped_by = StoppedBy.FAILURES
        elif finished >= self.options.trials:
            stopped_by = StoppedBy.BUDGET
        elif self.interrupts:
            stopped_by = StoppedBy.INTERRUPTED
        elif StoppedBy.TIMEOUT in reasons:
            stopped_by = StoppedBy.TIMEOUT
        else:
            stopped_by = StoppedBy.CRASHED
        return PoolOutcome(finished, self.options.trials, ran, failed, stopped_by)
