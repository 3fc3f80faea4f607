"""Test-only stops at the steps of ending a transaction, for the crash and power-cut tests
(tests/test_powercut_transactions.py).

A broker whose environment has ``TEST_ONLY_ODRADEK_TRANSACTION_STOP=STEP`` (or ``STEP:N``)
stops itself with SIGSTOP, every thread at once, the first (N-th) time it reaches STEP, so that
the test can SIGKILL it, or cut its power, exactly there. Without the variable, as always
outside those tests, a stop is one comparison. The steps, in the order a commit or abort
takes them:

- ``before-prepare``: EndTxn (or a timeout or fence) decided, its PrepareCommit/PrepareAbort
  not yet appended to ``__transaction_state``;
- ``after-prepare``: the prepare record durable, no marker appended yet;
- ``between-markers``: the markers of the transaction's first partitions durable, the next
  partition's not appended;
- ``before-complete``: every marker durable, CompleteCommit/CompleteAbort not yet appended.

(The variable's name does not start with ``ODRADEK_``: those are broker settings.)
"""

from __future__ import annotations

import logging
import os
import signal

logger = logging.getLogger(__name__)

ENV_VARIABLE = "TEST_ONLY_ODRADEK_TRANSACTION_STOP"
BEFORE_PREPARE = "before-prepare"
AFTER_PREPARE = "after-prepare"
BETWEEN_MARKERS = "between-markers"
BEFORE_COMPLETE = "before-complete"
STEPS = (BEFORE_PREPARE, AFTER_PREPARE, BETWEEN_MARKERS, BEFORE_COMPLETE)


def _parse(value: str | None) -> tuple[str | None, int]:
    if not value:
        return None, 0
    step, _, count = value.partition(":")
    if step not in STEPS:
        raise ValueError(f"{ENV_VARIABLE}={value!r}: the step must be one of {', '.join(STEPS)}")
    return step, int(count or 1)


_step, _remaining = _parse(os.environ.get(ENV_VARIABLE))


def armed(step: str) -> bool:
    """Whether the process is to stop at ``step`` (some time): the caller prepares the step
    (makes what comes before it durable) only then."""
    return _step == step


def stop_at(step: str) -> None:
    """Stop the whole process here if ``step`` is the armed one and this is its N-th time."""
    global _remaining
    if _step != step:
        return
    _remaining -= 1
    if _remaining != 0:
        return
    logger.warning("stopping the process at %s (%s: a test's crash point)", step, ENV_VARIABLE)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGSTOP)
