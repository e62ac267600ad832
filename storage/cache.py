"""The measurement cache: a network timed once on a device is never timed again there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .critical import guarded
from .models import Measurement


@dataclass(frozen=True)
class CacheKey:
    kind: str  # throughput, latency or peak
    signature: str
    input_shape: str
    batch_size: int
    precision: str
    xla: bool
    device_key: str

    def where(self) -> Any:
        return sa.and_(
            Measurement.kind == self.kind,
            Measurement.signature == self.signature,
            Measurement.input_shape == self.input_shape,
            Measurement.batch_size == self.batch_size,
            Measurement.precision == self.precision,
            Measurement.xla == int(self.xla),
            Measurement.device_key == self.device_key,
        )


@dataclass(frozen=True)
class CacheStats:
    entries: int
    hits: int
    seconds_saved: float


class MeasurementCache:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def get(self, key: CacheKey) -> dict[str, Any] | None:
        """The stored result for `key`, counting the hit; None when never measured."""
        entry = self.entry(key)
        return None if entry is None else entry[0]

    @guarded
    def entry(self, key: CacheKey) -> tuple[dict[str, Any], float] | None:
        """The stored result for `key` and what measuring it cost (s), counting the hit."""
        with Session(self.engine) as session, session.begin():
            row = session.scalars(sa.select(Measurement).where(key.where())).first()
            if row is None:
                return None
            session.execute(sa.update(Measurement).where(Measurement.id == row.id).values(hits=Measurement.hits + 1))
            return dict(row.result), float(row.seconds)

    @guarded
    def put(self, key: CacheKey, device: dict[str, Any], result: dict[str, Any], seconds: float) -> dict[str, Any]:
        """Store `result` for `key`; returns what is stored: `result`, or the row another worker
        stored for the same network a moment earlier (theirs is kept, so every trial reports
        the one stored figure)."""
        row = Measurement(
            kind=key.kind,
            signature=key.signature,
            input_shape=key.input_shape,
            batch_size=key.batch_size,
            precision=key.precision,
            xla=int(key.xla),
            device_key=key.device_key,
            device=device,
            result=result,
            seconds=seconds,
            hits=0,
        )
        try:
            with Session(self.engine) as session, session.begin():
                session.add(row)
        except IntegrityError:
            with Session(self.engine) as session:
                stored = session.scalars(sa.select(Measurement).where(key.where())).first()
            return result if stored is None else dict(stored.result)
        return result

    @guarded
    def replace(self, key: CacheKey, result: dict[str, Any], seconds: float) -> None:
        """Overwrite the stored result for `key` (a longer measurement of a device figure)."""
        with Session(self.engine) as session, session.begin():
            session.execute(sa.update(Measurement).where(key.where()).values(result=result, seconds=seconds))

    @guarded
    def stats(self) -> CacheStats:
        with Session(self.engine) as session:
            entries, hits, saved = session.execute(
                sa.select(
                    sa.func.count(Measurement.id),
                    sa.func.coalesce(sa.func.sum(Measurement.hits), 0),
                    sa.func.coalesce(sa.func.sum(Measurement.hits * Measurement.seconds), 0.0),
                )
            ).one()
        return CacheStats(int(entries), int(hits), float(saved))
