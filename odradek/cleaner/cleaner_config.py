"""CleanerConfig: the broker's ``log.cleaner.*`` settings the cleaner runs with."""

from __future__ import annotations

from dataclasses import dataclass
from sys import float_info

from odradek.config.broker_config import BrokerConfig


@dataclass(frozen=True)
class CleanerConfig:
    """Kafka's ``CleanerConfig``: threads, memory, I/O rate and back-off of the log cleaner."""

    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_io_bytes_per_second: float = float_info.max
    backoff_ms: int = 15_000
    enable_cleaner: bool = True

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> CleanerConfig:
        return cls(
            num_threads=config.log_cleaner_threads,
            dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
            dedupe_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
            io_buffer_size=config.log_cleaner_io_buffer_size,
            max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
            backoff_ms=config.log_cleaner_backoff_ms,
            enable_cleaner=config.log_cleaner_enable,
        )

    @property
    def dedupe_buffer_per_thread(self) -> int:
        """Each thread's share of the dedupe buffer: the memory of its offset map."""
        return self.dedupe_buffer_size // max(self.num_threads, 1)

    @property
    def io_bytes_per_second_per_thread(self) -> float:
        """Each thread's share of the I/O rate (every thread's cleaning runs in its own process,
        so each is throttled on its own)."""
        return self.max_io_bytes_per_second / max(self.num_threads, 1)
