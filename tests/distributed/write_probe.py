"""A pytest plugin for the torchrun tests (``-p write_probe``): logs every file tesserabench writes
through its one writer, ``files.write_atomic``, with the rank that wrote it."""

import os

from pytest_tesserabench.record import files


def pytest_configure(config):
    original = files.write_atomic

    def logged(path, content):
        with open(os.environ["TESSERABENCH_WRITE_LOG"], "a") as log:
            log.write(f"{os.environ.get('RANK')} {path}\n")
        return original(path, content)

    files.write_atomic = logged
