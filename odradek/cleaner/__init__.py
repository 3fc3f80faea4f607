"""Log compaction (design §11): for topics whose ``cleanup.policy`` has ``compact``, keep only the
latest record of each key, and tombstones until their batch's delete horizon
(``delete.retention.ms`` after the cleaning that first kept them).

Who does what, one file each, named as in Kafka:

- ``log_cleaner.py``, LogCleaner: the broker's service; starts the threads, and is what the
  LogManager pauses, resumes and aborts (plus its gauges, CleanerMetrics).
- ``log_cleaner_manager.py``, LogCleanerManager: which log to clean next and who holds each log
  (LogCleaningState); ``cleanable_offsets.py`` measures a log's dirty section, ``log_to_clean.py``
  its sizes; ``cleaner_offset_checkpoints.py`` is the one owner of ``cleaner-offset-checkpoint``.
- ``cleaner_thread.py``, CleanerThread: takes the filthiest log, has it cleaned, swaps the result
  in (``cleaned_segment_swap.py``) and checkpoints; replaces a dead worker with backoff.
- ``cleaner_process.py``, CleanerProcess: the worker process a thread runs its cleanings in, both
  the thread's handle and the worker's ``main``; ``cleaning_task.py`` is what crosses the pipe.
- ``cleaner.py``, Cleaner: one run, in the worker: maps the dirty keys, rewrites the segments in
  groups into ``.cleaned`` segments, renamed ``.swap``. Its parts: the offset map
  (``offset_map.py``, ``skimpy_offset_map.py``, ``_offset_map.c``, with ``batch_scan.py`` and
  ``batch_keys.py`` its Python twin), ``batch_filter.py``, ``cleaned_writer.py``,
  ``segment_chunks.py``, ``segment_snapshot.py``, ``throttler.py``, ``cleaner_stats.py``.
"""
