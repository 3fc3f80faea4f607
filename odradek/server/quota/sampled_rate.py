"""SampledRate: a rate measured over a few consecutive time windows (Kafka's ``Rate`` over a
``SampledStat``).

Values are added to the current sample; a sample older than its window gives way to a new one,
and samples older than all the windows together are forgotten. The rate is their sum over the
time they span, counted as at least all but one full window, so a first burst is measured
against the whole quota window rather than the instant it took.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Sample:
    start_ms: float
    value: float = 0.0


class SampledRate:
    """``samples`` windows of ``window_ms`` each; values per second."""

    def __init__(self, samples: int, window_ms: float, now_ms: float) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples = [_Sample(now_ms)]
        self._current = 0
        self.last_record_ms = now_ms

    def record(self, value: float, now_ms: float) -> None:
        """Add ``value`` at ``now_ms``."""
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                self._samples.append(_Sample(now_ms))
            else:
                sample = self._samples[self._current]
                sample.start_ms, sample.value = now_ms, 0.0
            sample = self._samples[self._current]
        sample.value += value
        self.last_record_ms = now_ms

    def unrecord(self, value: float) -> None:
        """Take back a value just recorded (a fetch answered without its records)."""
        self._samples[self._current].value -= value

    def measure(self, now_ms: float) -> float:
        """The rate at ``now_ms``, per second (reads only: safe from a scrape's thread)."""
        live = self._live(now_ms)
        return sum(sample.value for sample in live) * 1000.0 / self._span_ms(live, now_ms)

    def window_size_ms(self, now_ms: float) -> float:
        """The time the live samples span, at least ``samples - 1`` full windows."""
        return self._span_ms(self._live(now_ms), now_ms)

    def _live(self, now_ms: float) -> list[_Sample]:
        """The samples not older than all the windows together (Kafka resets the others)."""
        expired_before = now_ms - self.samples * self.window_ms
        return [sample for sample in self._samples if sample.start_ms > expired_before]

    def _span_ms(self, live: list[_Sample], now_ms: float) -> float:
        elapsed = now_ms - min((sample.start_ms for sample in live), default=now_ms)
        full_windows = int(elapsed // self.window_ms)
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1.0)
