"""ClientQuotaManager: one quota type's usage and throttle times (Kafka's
``ClientQuotaManager``).

Usage is counted per sensor: the user and/or client id whose quota applies (all clients that
share them share the rate). Recording a value that takes the rate over the quota gives the
time the client must wait for the rate to come back to it: (rate - quota) / quota x the
measured window, as Kafka computes it. Sensors idle for an hour are dropped, as Kafka expires
them, so client ids that come and go do not grow memory without bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.server.quota.client_quota_entity import ClientQuotaEntity, candidates, sensor_key
from odradek.server.quota.sampled_rate import SampledRate

SENSOR_IDLE_MS = 3600 * 1000.0
PURGE_EVERY_MS = 60 * 1000.0
MAX_RESOLVED = 10000
"""Clients whose quota lookup is remembered; the cache is cleared beyond."""


@dataclass
class QuotaSensor:
    """The usage counted together for one user and/or client id."""

    user: str
    client_id: str
    rate: SampledRate
    quota: float
    throttle_ms_total: float = 0.0
    throttled: int = 0


class ClientQuotaManager:
    """Usage against ``quota_key`` (e.g. ``producer_byte_rate``)."""

    def __init__(self, quota_key: str, samples: int, window_s: float) -> None:
        self.quota_key = quota_key
        self.samples = samples
        self.window_ms = window_s * 1000.0
        self._overrides: dict[ClientQuotaEntity, float] = {}
        self._resolved: dict[tuple[str, str], tuple[float, tuple[str, str]] | None] = {}
        self._sensors: dict[tuple[str, str], QuotaSensor] = {}
        self._last_purge_ms = 0.0

    @property
    def enabled(self) -> bool:
        return bool(self._overrides)

    def update(self, overrides: dict[ClientQuotaEntity, float]) -> None:
        """The quotas of this type, by entity; sensors pick up their new quota."""
        self._overrides = dict(overrides)
        self._resolved.clear()
        for key, sensor in list(self._sensors.items()):
            found = self._resolve(sensor.user, sensor.client_id)
            if found is None or found[1] != key:
                del self._sensors[key]
            else:
                sensor.quota = found[0]

    def quota_for(self, user: str, client_id: str) -> float | None:
        found = self._resolve(user, client_id)
        return None if found is None else found[0]

    def record(self, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Count ``value`` for the client; the throttle time in ms (0: within its quota)."""
        found = self._resolve(user, client_id)
        if found is None:
            return 0
        quota, key = found
        sensor = self._sensors.get(key)
        if sensor is None:
            self._purge(now_ms)
            sensor = QuotaSensor(
                key[0], key[1], SampledRate(self.samples, self.window_ms, now_ms), quota
            )
            self._sensors[key] = sensor
        rate = sensor.rate
        rate.record(value, now_ms)
        measured = rate.measure(now_ms)
        if measured <= quota:
            return 0
        window_ms = rate.window_size_ms(now_ms)
        throttle_ms = min((measured - quota) / quota * window_ms, self.samples * self.window_ms)
        sensor.throttle_ms_total += throttle_ms
        sensor.throttled += 1
        return round(throttle_ms)

    def unrecord(self, user: str, client_id: str, value: float) -> None:
        """Take back ``value`` just recorded for the client."""
        found = self._resolve(user, client_id)
        sensor = self._sensors.get(found[1]) if found is not None else None
        if sensor is not None:
            sensor.rate.unrecord(value)

    def sensors(self) -> list[QuotaSensor]:
        return list(self._sensors.values())

    def _resolve(self, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        cache_key = (user, client_id)
        try:
            return self._resolved[cache_key]
        except KeyError:
            pass
        found = None
        for entity in candidates(user, client_id):
            quota = self._overrides.get(entity)
            if quota is not None:
                found = (quota, sensor_key(entity, user, client_id))
                break
        if len(self._resolved) >= MAX_RESOLVED:
            self._resolved.clear()
        self._resolved[cache_key] = found
        return found

    def _purge(self, now_ms: float) -> None:
        if now_ms - self._last_purge_ms < PURGE_EVERY_MS:
            return
        self._last_purge_ms = now_ms
        for key, sensor in list(self._sensors.items()):
            if now_ms - sensor.rate.last_record_ms > SENSOR_IDLE_MS:
                del self._sensors[key]
