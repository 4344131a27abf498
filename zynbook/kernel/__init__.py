"""The ZynML Jupyter kernel: cells are ZynML, state persists between cells.

`python -m zynbook.kernel install [--user|--sys-prefix|--prefix DIR]` installs the kernelspec
by hand (a wheel carries it as shared data, so `pip install` already does); `python -m
zynbook.kernel -f CONNECTION_FILE` is what Jupyter runs.
"""
from __future__ import annotations

KERNEL_NAME = "zynml"

LANGUAGE_INFO = {
    "name": "zynml",
    "mimetype": "text/x-zynml",
    "file_extension": ".zyn",
    "codemirror_mode": "zynml",
    "pygments_lexer": "zynml",
    "nbconvert_exporter": "script",
}

from .kernelspec import install, kernelspec_dir  # noqa: E402

__all__ = ["KERNEL_NAME", "LANGUAGE_INFO", "install", "kernelspec_dir"]
