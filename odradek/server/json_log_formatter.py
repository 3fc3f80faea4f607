"""JsonLogFormatter: the broker's log lines as JSON objects (``log.format=json``)."""

from __future__ import annotations

import json
import logging


class JsonLogFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message and the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)
