"""Install the ZynML kernelspec (`resources/`, the same files the wheel ships as shared data)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path


def kernelspec_dir() -> Path:
    """The directory holding kernel.json and the logos."""
    return Path(__file__).with_name("resources")


def install(user: bool = False, prefix: str | None = None, name: str = "zynml") -> str:
    """Install the kernelspec; returns the directory it went to.

    Default: the system location (like `jupyter kernelspec install`); `user=True`: the
    user's Jupyter data directory; `prefix`: PREFIX/share/jupyter/kernels (use sys.prefix
    for the active environment).

    The installed kernel.json names this interpreter by its absolute path, so a Jupyter
    from any other environment starts the kernel where ZynBook is installed."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / name
        shutil.copytree(kernelspec_dir(), staged)
        spec_file = staged / "kernel.json"
        spec = json.loads(spec_file.read_text())
        spec["argv"][0] = sys.executable
        spec_file.write_text(json.dumps(spec, indent=2) + "\n")
        return KernelSpecManager().install_kernel_spec(
            str(staged), kernel_name=name, user=user, prefix=prefix)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m zynbook.kernel install",
        description="Install the ZynML Jupyter kernelspec.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true",
                       help="install for the current user (~/.local/share/jupyter)")
    where.add_argument("--sys-prefix", action="store_true",
                       help=f"install into the active environment ({sys.prefix})")
    where.add_argument("--prefix", help="install into PREFIX/share/jupyter/kernels")
    parser.add_argument("--name", default="zynml", help="kernel name (default: zynml)")
    args = parser.parse_args(argv)
    prefix = sys.prefix if args.sys_prefix else args.prefix
    if prefix:
        prefix = os.path.abspath(prefix)
    dest = install(user=args.user, prefix=prefix, name=args.name)
    print(f"Installed the ZynML kernelspec '{args.name}' in {dest}")
    return 0
