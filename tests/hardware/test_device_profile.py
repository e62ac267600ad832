"""The device profile (NAS_DEVICE_PROFILE): a new database starts from the device-wide figures
measured for another one on this machine, and measures only its networks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest

from nas.errors import NasError
from nas.search import runtime

runtime.import_tensorflow()

from nas.search.hardware import HardwareProfiler
from nas.search.hardware import profiler as profiler_module
from nas.search.nets import build_model
from nas.search.space import MeasureSpec, load_space
from nas.storage import MeasurementCache, open_storage, resolve_storage_url

from ..helpers import run_cli

SPEC = MeasureSpec(
    batch_sizes=[8], rounds=3, round_seconds=0.01, warmup_seconds=0.3, latency=False,
    baseline_rounds=3, peak_seconds=0.05,
)  # fmt: skip


def _model() -> Any:
    trial = optuna.create_study(directions=["maximize", "maximize"]).ask()
    return build_model(load_space("tiny").sample(trial, num_classes=10, channels=1), seed=0)


@pytest.fixture
def timed(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each figure was really measured: the baseline and the candidate are both
    throughputs; the candidate's is interleaved with the reference, the baseline is the
    reference itself."""
    calls: Counter[str] = Counter()

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls["baseline" if name == "measure_throughput" and kwargs.get("reference") is None else name] += 1
            return real(*args, **kwargs)

        return wrapper

    for name in ("measure_throughput", "measure_matmul_peak"):
        monkeypatch.setattr(profiler_module, name, spy(name, getattr(profiler_module, name)))
    return calls


def _measure_on_a_new_database(db: Path) -> tuple[HardwareProfiler, MeasurementCache]:
    cache = MeasurementCache(open_storage(resolve_storage_url(f"sqlite:///{db}")).engine)
    hardware = HardwareProfiler(SPEC, cache)
    hardware.measure(_model(), precision="float32", xla=False)
    hardware.peak_flops("float32")
    return hardware, cache


def test_a_new_database_starts_from_the_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timed: Counter[str]
) -> None:
    monkeypatch.setenv("NAS_DEVICE_PROFILE", str(tmp_path / "profile" / "device.db"))
    first, _ = _measure_on_a_new_database(tmp_path / "a.db")
    assert timed == {"baseline": 1, "measure_throughput": 1, "measure_matmul_peak": 1}
    timed.clear()
    second, cache = _measure_on_a_new_database(tmp_path / "b.db")
    # The network is new to this database and measured; the baseline and the peak are not.
    assert timed == {"measure_throughput": 1}
    assert second.baseline(8) == first.baseline(8) and second.peak_flops("float32") == first.peak_flops("float32")
    assert cache.stats().entries == 3  # the database holds both device figures as its own
    # Without the profile a new database measures the device again.
    monkeypatch.delenv("NAS_DEVICE_PROFILE")
    timed.clear()
    _measure_on_a_new_database(tmp_path / "c.db")
    assert timed == {"baseline": 1, "measure_throughput": 1, "measure_matmul_peak": 1}


def test_without_a_cache_the_profile_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timed: Counter[str]
) -> None:
    monkeypatch.setenv("NAS_DEVICE_PROFILE", str(tmp_path / "device.db"))
    _measure_on_a_new_database(tmp_path / "a.db")
    timed.clear()
    HardwareProfiler(SPEC, None).baseline(8)  # --no-cache measures everything afresh
    assert timed == {"baseline": 1}
    monkeypatch.setenv("NAS_DEVICE_PROFILE", str(tmp_path / "unused.db"))
    hardware = HardwareProfiler(SPEC, None)
    hardware.baseline(8)
    assert hardware.profile is None and not (tmp_path / "unused.db").exists()  # nor written


def test_brief_figures_never_stand_in_for_longer_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timed: Counter[str]
) -> None:
    """A smoke run (few baseline rounds, a short peak) leaves its figures in the profile; a
    run that asks for longer measures the device itself, and its figures serve both."""
    monkeypatch.setenv("NAS_DEVICE_PROFILE", str(tmp_path / "device.db"))
    _measure_on_a_new_database(tmp_path / "brief.db")
    timed.clear()
    longer = SPEC.model_copy(update={"baseline_rounds": 6, "peak_seconds": 0.1})

    def device_figures(db: str) -> None:
        cache = MeasurementCache(open_storage(resolve_storage_url(f"sqlite:///{tmp_path / db}")).engine)
        HardwareProfiler(longer, cache).baseline(8)
        HardwareProfiler(longer, cache).peak_flops("float32")

    device_figures("long.db")
    assert timed == {"baseline": 1, "measure_matmul_peak": 1}
    timed.clear()
    device_figures("long-again.db")  # the longer figures replaced the brief ones
    assert timed == {}
    _measure_on_a_new_database(tmp_path / "brief-again.db")
    assert timed == {"measure_throughput": 1}  # and serve the brief run too


@pytest.mark.parametrize("kind", ["folder", "text"])
def test_an_unusable_profile_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    if kind == "folder":
        (tmp_path / "file").write_text("")
        path = tmp_path / "file" / "device.db"  # its folder is a file
    else:
        path = tmp_path / "device.db"
        path.write_text("not a database\n" * 100)
    monkeypatch.setenv("NAS_DEVICE_PROFILE", str(path))
    with pytest.raises(NasError, match=f"NAS_DEVICE_PROFILE={path}: cannot use it as the device profile"):
        HardwareProfiler(
            SPEC, MeasurementCache(open_storage(resolve_storage_url(f"sqlite:///{tmp_path / 'x.db'}")).engine)
        )
    result = run_cli("search", "tiny", "--trials", "1", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: NAS_DEVICE_PROFILE={path}: cannot use it as the device profile")
    assert not (tmp_path / "nas.db").exists()  # told before any database is made


def test_a_profile_that_fails_later_is_dropped_not_the_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timed: Counter[str]
) -> None:
    import sqlalchemy.exc

    monkeypatch.setenv("NAS_DEVICE_PROFILE", str(tmp_path / "device.db"))
    cache = MeasurementCache(open_storage(resolve_storage_url(f"sqlite:///{tmp_path / 'a.db'}")).engine)
    hardware = HardwareProfiler(SPEC, cache)
    assert hardware.profile is not None

    def full_disk(*args: Any) -> None:
        raise sqlalchemy.exc.OperationalError("INSERT", {}, Exception("database or disk is full"))

    monkeypatch.setattr(hardware.profile, "entry", full_disk)
    with pytest.warns(
        RuntimeWarning, match=r"device profile \(NAS_DEVICE_PROFILE\) not used from here on: .*disk is full"
    ):
        assert hardware.baseline(8) > 0  # measured instead
    assert hardware.profile is None and timed == {"baseline": 1}
    assert cache.stats().entries == 1
