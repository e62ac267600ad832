"""Worker placement and the study lock, without starting TensorFlow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nas.errors import NasError
from nas.search.workers import parse_gpus, plan_workers

from ..helpers import server_url


def test_cores_are_split_into_disjoint_sets() -> None:
    plan = plan_workers(2, None, None, cpus=[0, 1, 2, 3, 4])
    assert [p.cpus for p in plan] == [(0, 1), (2, 3, 4)]
    assert [p.intra_op_threads for p in plan] == [2, 3]
    assert all(p.gpu is None and "CUDA_VISIBLE_DEVICES" not in p.env() for p in plan)
    assert plan[1].env()["NAS_CPUS"] == "2,3,4"


def test_more_workers_than_cores_share_them_round_robin() -> None:
    plan = plan_workers(3, None, None, cpus=[0, 1])
    assert [p.cpus for p in plan] == [(0,), (1,), (0,)]
    assert all(p.intra_op_threads == 1 and p.inter_op_threads == 1 for p in plan)


def test_gpus_round_robin() -> None:
    plan = plan_workers(4, ["2", "5"], 2, cpus=list(range(8)))
    assert [p.gpu for p in plan] == ["2", "5", "2", "5"]
    assert [p.env()["CUDA_VISIBLE_DEVICES"] for p in plan] == ["2", "5", "2", "5"]
    # Default worker count: one per GPU and share.
    assert len(plan_workers(None, ["0", "1"], 3, cpus=list(range(8)))) == 6


def test_bad_gpu_options() -> None:
    with pytest.raises(NasError, match="expected GPU indices"):
        parse_gpus("a,b")
    with pytest.raises(NasError, match="more than 2 GPU"):
        plan_workers(3, ["0", "1"], None, cpus=[0, 1])


_HOLD = """
import sys, time
import sqlalchemy
from nas.storage import resolve_storage_url, study_lock
url, name, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
parsed = resolve_storage_url(url)
with study_lock(parsed, sqlalchemy.create_engine(parsed.raw), name):
    print("in", time.monotonic(), flush=True)
    time.sleep(seconds)
    print("out", time.monotonic(), flush=True)
"""


def _hold(url: str, name: str, seconds: float) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _HOLD, url, name, str(seconds)], stdout=subprocess.PIPE, text=True)


def _two_holders_never_overlap(url: str) -> None:
    procs = [_hold(url, "study-a", 1.0) for _ in range(2)]
    events = []
    for p in procs:
        stdout, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        events += [(float(t), kind) for kind, t in (line.split() for line in stdout.splitlines())]
    assert [kind for _, kind in sorted(events)] == ["in", "out", "in", "out"]


def test_study_lock_excludes_across_processes_sqlite(tmp_path: Path) -> None:
    _two_holders_never_overlap(f"sqlite:///{tmp_path / 'lock.db'}")


@pytest.mark.server
def test_study_lock_excludes_across_processes_postgresql() -> None:
    _two_holders_never_overlap(server_url("postgresql"))


@pytest.mark.server
def test_study_lock_excludes_across_processes_mariadb() -> None:
    _two_holders_never_overlap(server_url("mysql"))


def test_study_lock_is_freed_when_its_holder_is_killed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lock.db'}"
    holder = _hold(url, "study-b", 600.0)
    assert holder.stdout is not None and holder.stdout.readline().startswith("in")
    holder.kill()
    holder.wait()
    second = _hold(url, "study-b", 0.0)
    stdout, _ = second.communicate(timeout=60)
    assert second.returncode == 0 and stdout.startswith("in")
