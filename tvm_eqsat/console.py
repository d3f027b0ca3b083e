"""A quiet console for the long scripts: what TVM's C++ code writes to the process's
standard error (the same warning, thousands of times, while MetaSchedule tunes) goes to
a log file, and the console keeps the progress bars and the results."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path


@contextlib.contextmanager
def native_output_to(log_path: str | os.PathLike):
    """Inside: file descriptor 2 (C++ warnings, forked builders' output) writes to
    ``log_path``, while ``sys.stderr`` (tqdm bars, Python warnings) still writes to the
    console.  Yields (console stream, log file stream): give both to ``logging`` to have
    Python's log records on the console and in the log."""
    path = Path(log_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved_fd = os.dup(2)
    console = os.fdopen(os.dup(saved_fd), "w", buffering=1)
    log_file = open(path, "a", buffering=1)
    old_stderr = sys.stderr
    os.dup2(log_file.fileno(), 2)
    sys.stderr = console
    try:
        yield console, log_file
    finally:
        console.flush()
        os.dup2(saved_fd, 2)
        sys.stderr = old_stderr
        console.close()
        log_file.close()
        os.close(saved_fd)
