"""Our own tables (measurement cache, weight store) on the real PostgreSQL and MariaDB servers,
and `nas export` / `nas report` on a study kept there."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from nas.storage import CacheKey, MeasurementCache, open_storage, resolve_storage_url
from nas.storage.engine import widen_weight_sizes
from nas.storage.models import Measurement, Weights
from nas.storage.weights import WeightStore

from ..helpers import drop_study, run_cli, server_url

KINDS = ["postgresql", "mysql"]


@pytest.fixture(params=KINDS)
def engine(request: pytest.FixtureRequest) -> Iterator[sa.Engine]:
    storage = open_storage(resolve_storage_url(server_url(request.param)))
    yield storage.engine
    storage.engine.dispose()


@pytest.mark.server
def test_measurement_cache_on_a_server(engine: sa.Engine) -> None:
    device = f"test-{uuid.uuid4().hex[:12]}"  # a device no other test or run uses
    key = CacheKey("throughput", "a" * 64, "8x8x1", 32, "float32", False, device)
    cache = MeasurementCache(engine)
    try:
        assert cache.get(key) is None
        before = cache.stats()
        assert cache.put(key, {"name": "cpu"}, {"images_per_s": 1234.5}, seconds=2.0) == {"images_per_s": 1234.5}
        # A racing worker: the first row is kept, and the racer is told the stored figure.
        assert cache.put(key, {"name": "cpu"}, {"images_per_s": 999.0}, seconds=2.0) == {"images_per_s": 1234.5}
        assert cache.get(key) == {"images_per_s": 1234.5}
        assert cache.get(key) == {"images_per_s": 1234.5}
        after = cache.stats()
        assert (after.entries - before.entries, after.hits - before.hits) == (1, 2)
        assert after.seconds_saved - before.seconds_saved == pytest.approx(4.0)
        assert cache.get(CacheKey("throughput", "a" * 64, "8x8x1", 32, "float32", True, device)) is None
    finally:
        with engine.begin() as connection:
            connection.execute(sa.delete(Measurement).where(Measurement.device_key == device))


@pytest.mark.server
def test_weight_store_on_a_server_holds_sizes_over_4_gib(engine: sa.Engine, tmp_path: Path) -> None:
    study = f"nas-test-{uuid.uuid4().hex[:8]}"
    store = WeightStore(engine, tmp_path / "artifacts")
    source = tmp_path / "model.keras"
    try:
        for trial in range(3):
            source.write_bytes(b"w" * (100 + trial))
            stored = store.save(study, trial, source)
            assert stored.path == tmp_path / "artifacts" / study / f"trial-{trial}.keras"
        assert [w.bytes for w in store.all(study)] == [100, 101, 102]
        assert store.retain(study, keep={1}) == [0, 2]
        assert [w.available for w in store.all(study)] == [False, True, False]
        # A 5 GiB model's size does not fit a 32-bit column.
        huge = 5 * 2**30
        with engine.begin() as connection:
            connection.execute(sa.update(Weights).where(Weights.study == study, Weights.trial == 1).values(bytes=huge))
        stored_one = store.get(study, 1)
        assert stored_one is not None and stored_one.bytes == huge
    finally:
        with engine.begin() as connection:
            connection.execute(sa.delete(Weights).where(Weights.study == study))


@pytest.mark.server
def test_a_32_bit_size_column_from_an_older_database_is_widened(engine: sa.Engine) -> None:
    """A database whose nas_weights was made with a 32-bit `bytes` column: opening it widens it."""
    schema = f"nas_widen_{uuid.uuid4().hex[:8]}"
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        if engine.dialect.name == "postgresql":
            scoped = sa.create_engine(engine.url, connect_args={"options": f"-csearch_path={schema}"})
        else:  # MySQL/MariaDB: a schema is a database
            scoped = sa.create_engine(engine.url.set(database=schema))
        with scoped.begin() as connection:
            connection.exec_driver_sql(
                "CREATE TABLE nas_weights (id INTEGER PRIMARY KEY, study VARCHAR(512), trial INTEGER, "
                "host VARCHAR(255), path VARCHAR(4096), bytes INTEGER NOT NULL, sha256 VARCHAR(64))"
            )
        columns = {c["name"]: c["type"] for c in sa.inspect(scoped).get_columns("nas_weights")}
        assert not isinstance(columns["bytes"], sa.BigInteger)
        widen_weight_sizes(scoped)
        columns = {c["name"]: c["type"] for c in sa.inspect(scoped).get_columns("nas_weights")}
        assert isinstance(columns["bytes"], sa.BigInteger)
        with scoped.begin() as connection:
            connection.exec_driver_sql(f"INSERT INTO nas_weights VALUES (1, 's', 0, 'h', '/p', {5 * 2**30}, 'x')")
            assert connection.exec_driver_sql("SELECT bytes FROM nas_weights").scalar() == 5 * 2**30
        scoped.dispose()
    finally:
        with engine.begin() as connection:
            drop = f"DROP SCHEMA {schema} CASCADE" if engine.dialect.name == "postgresql" else f"DROP DATABASE {schema}"
            connection.exec_driver_sql(drop)


@pytest.mark.slow
@pytest.mark.server
@pytest.mark.parametrize("kind", KINDS)
def test_search_export_and_report_on_a_server(kind: str, workdir: Path) -> None:
    """Weights saved, cache filled, export run and report written for a study on the server."""
    url = server_url(kind)
    name = f"nas-test-{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(url)
    try:
        result = run_cli("search", "tiny", "--study", name, "--storage", url, "--trials", "2", cwd=workdir)
        assert result.returncode == 0, result.stderr[-3000:]
        rows = WeightStore(engine, workdir / "nas-artifacts").all(name)
        assert rows and all(r.bytes == r.path.stat().st_size for r in rows if r.available)
        out = workdir / "exported"
        exported = run_cli("export", name, "--storage", url, "--format", "keras", "--out", str(out), cwd=workdir)
        assert exported.returncode == 0, exported.stderr[-3000:]
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["verdict"] == "passed" and manifest["trials"]
        assert {r["trial"] for r in manifest["trials"]} <= {r.trial for r in rows if r.available}
        report = run_cli("report", name, "--storage", url, "--out", str(workdir / "report.html"), cwd=workdir)
        assert report.returncode == 0, report.stderr[-3000:]
        html = (workdir / "report.html").read_text()
        for record in manifest["trials"]:
            assert f"<td>{record['trial']}</td>" in html  # the front's trials are in the report's table
    finally:
        drop_study(url, name)
        with contextlib.suppress(sa.exc.SQLAlchemyError), engine.begin() as connection:
            connection.execute(sa.delete(Weights).where(Weights.study == name))
        engine.dispose()
