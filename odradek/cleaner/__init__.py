"""Log compaction (SPEC 11): for topics whose ``cleanup.policy`` has ``compact``, keep only the
latest record of each key, and tombstones for ``delete.retention.ms``.

``LogCleaner`` runs cleaner threads that take the dirtiest log from ``LogCleanerManager``;
each run happens in the thread's long-lived worker process (``CleanerProcess`` sends the task
to ``cleaner_worker``, which runs ``Cleaner``); it writes ``.cleaned`` segments and renames
them ``.swap``; the thread then swaps them into the live
log under its lock (``Log.replace_segments``) and checkpoints the new first dirty offset.
"""
