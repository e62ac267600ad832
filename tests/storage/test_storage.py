from __future__ import annotations

import re
import sqlite3
import uuid
from pathlib import Path

import optuna
import pytest

from nas.errors import NasError
from nas.storage import open_storage, resolve_storage_url

from ..helpers import server_url


def test_default_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAS_STORAGE", raising=False)
    assert resolve_storage_url(None).raw == "sqlite:///nas.db"
    monkeypatch.setenv("NAS_STORAGE", "sqlite:///other.db")
    assert resolve_storage_url(None).raw == "sqlite:///other.db"
    assert resolve_storage_url("sqlite:///flag.db").raw == "sqlite:///flag.db"


def test_password_is_masked() -> None:
    url = resolve_storage_url("postgresql+psycopg://alice:s3cret@127.0.0.1:5432/test")
    assert "s3cret" not in url.masked and "s3cret" not in str(url)
    assert "***" in url.masked
    assert "s3cret" in url.raw


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not a url", "is not a database URL"),
        ("not-a-url://u:topsecret@@", "is not a database URL"),
        ("redis://u:topsecret@localhost:6379/0", "unsupported database 'redis'"),
        ("postgresql+nosuchdriver://u:topsecret@h/db", "driver 'nosuchdriver'"),
    ],
)
def test_bad_urls(text: str, message: str) -> None:
    with pytest.raises(NasError, match=re.escape(message)) as info:
        resolve_storage_url(text)
    assert "topsecret" not in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "postgresql+psycopg://u:topsecret@@h/db",  # a doubled @ is part of the host, not an error
        "postgresql+psycopg://u:topsecret@127.0.0.1:5432/test",
        "mysql+pymysql://u:topsecret@127.0.0.1:3306/test",
    ],
)
def test_accepted_urls_hide_the_password(text: str) -> None:
    url = resolve_storage_url(text)
    assert url.url.password == "topsecret" and "topsecret" in url.raw
    assert "topsecret" not in url.masked and "topsecret" not in str(url)
    assert "***" in url.masked


def test_sqlite_missing_folder_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(NasError, match=r"folder .* does not exist"):
        open_storage(resolve_storage_url(f"sqlite:///{tmp_path}/nowhere/x.db"))
    with pytest.raises(NasError, match="no database at"):
        open_storage(resolve_storage_url(f"sqlite:///{tmp_path}/absent.db"), create=False)
    assert not (tmp_path / "absent.db").exists()


def test_not_a_database(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(NasError, match="cannot open"):
        open_storage(resolve_storage_url(f"sqlite:///{junk}"))


def test_sqlite_schema_created_once_in_wal_mode(tmp_path: Path) -> None:
    db = tmp_path / "nas.db"
    storage = open_storage(resolve_storage_url(f"sqlite:///{db}"))
    optuna.create_study(study_name="s", storage=storage)
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    assert {"studies", "trials", "trial_heartbeats"} <= tables
    # Reopening for reading neither recreates nor complains.
    again = open_storage(resolve_storage_url(f"sqlite:///{db}"), create=False)
    assert [s.study_name for s in optuna.get_all_study_summaries(again)] == ["s"]


def test_unreachable_server_is_one_line() -> None:
    url = resolve_storage_url("postgresql+psycopg://nobody:pw123@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(NasError) as info:
        open_storage(url)
    assert "\n" not in str(info.value)
    assert "pw123" not in str(info.value)
    assert "cannot open storage" in str(info.value)


@pytest.mark.server
@pytest.mark.parametrize("kind", ["postgresql", "mysql"])
def test_real_server_storage(kind: str) -> None:
    """The same storage code against the local PostgreSQL and MariaDB; required in CI."""
    url = resolve_storage_url(server_url(kind))
    storage = open_storage(url)
    name = f"nas-test-{uuid.uuid4().hex[:8]}"
    study = optuna.create_study(study_name=name, storage=storage, directions=["maximize", "maximize"])
    try:
        study.set_metric_names(["accuracy", "throughput"])
        trial = study.ask()
        storage.record_heartbeat(trial._trial_id)
        study.tell(trial, [0.9, 1000.0])
        again = optuna.load_study(study_name=name, storage=open_storage(url, create=False))
        assert again.metric_names == ["accuracy", "throughput"]
        assert again.trials[0].values == [0.9, 1000.0]
    finally:
        optuna.delete_study(study_name=name, storage=storage)
