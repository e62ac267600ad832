"""The project's own tables (SQLAlchemy 2 typed ORM), beside Optuna's in the same database."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Float, Integer, String, UniqueConstraint, func
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Measurement(Base):
    """One hardware measurement of one network on one device, reused across trials and studies."""

    __tablename__ = "nas_measurements"
    __table_args__ = (
        UniqueConstraint(
            "kind",
            "signature",
            "input_shape",
            "batch_size",
            "precision",
            "xla",
            "device_key",
            name="uq_nas_measurement",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # throughput, latency or peak
    signature: Mapped[str] = mapped_column(String(64))  # sha256 of the architecture
    input_shape: Mapped[str] = mapped_column(String(64))  # "16x16x1"
    batch_size: Mapped[int] = mapped_column(Integer)
    precision: Mapped[str] = mapped_column(String(32))
    xla: Mapped[int] = mapped_column(Integer)  # 0/1: portable across SQLite, PostgreSQL, MySQL
    device_key: Mapped[str] = mapped_column(String(64))
    device: Mapped[dict[str, Any]] = mapped_column(JSON)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    seconds: Mapped[float] = mapped_column(Float)  # what the measurement cost when it was made
    hits: Mapped[int] = mapped_column(Integer, default=0)
    created: Mapped[dt.datetime] = mapped_column(DateTime, server_default=func.now())


class Weights(Base):
    """The trained model of one finished trial: a `.keras` file in the artifact folder.

    Rows outlive their files: `deleted` records when retention removed the file, so exports
    can say why a trial has no weights."""

    __tablename__ = "nas_weights"
    __table_args__ = (UniqueConstraint("study", "trial", name="uq_nas_weights"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study: Mapped[str] = mapped_column(String(512))
    trial: Mapped[int] = mapped_column(Integer)
    host: Mapped[str] = mapped_column(String(255))
    path: Mapped[str] = mapped_column(String(4096))
    bytes: Mapped[int] = mapped_column(BigInteger)  # INTEGER is 32-bit on PostgreSQL and MySQL
    sha256: Mapped[str] = mapped_column(String(64))
    created: Mapped[dt.datetime] = mapped_column(DateTime, server_default=func.now())
    deleted: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
