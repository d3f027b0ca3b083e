"""The quiet console of the long scripts: native stderr to a log file, Python's to the console."""

import os
import sys

from tvm_eqsat import console


def test_native_output_goes_to_the_log_and_the_console_keeps_the_progress(tmp_path, capfd):
    with console.native_output_to(tmp_path / "run.log") as (stream, log_file):
        os.write(2, b"transform.h:1261: Warning: the same warning again\n")  # what TVM's C++ code does
        sys.stderr.write("progress bar\n")
        log_file.write("a log record\n")
    os.write(2, b"after\n")
    err = capfd.readouterr().err
    log = (tmp_path / "run.log").read_text()
    assert "the same warning again" in log and "a log record" in log and "progress bar" not in log
    assert "progress bar" in err and "after" in err and "the same warning" not in err
