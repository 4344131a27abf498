"""The `zynbook` command: check, show the CIR of, or run a ZynML file."""
from __future__ import annotations

import argparse
import sys

from .errors import ZynMLError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="zynbook", description="ZynML compute kernels")
    sub = parser.add_subparsers(dest="command", required=True)
    p_check = sub.add_parser("check", help="parse and check a program; silent when it is good")
    p_check.add_argument("file")
    p_cir = sub.add_parser("cir", help="print the Compute IR of every compute block")
    p_cir.add_argument("file")
    p_run = sub.add_parser("run", help="run a program and print its last value")
    p_run.add_argument("file")
    p_run.add_argument("--device", default="cpu", help="cpu, cuda:0, vulkan:0, auto, ...")
    p_src = sub.add_parser("source", help="print generated code for every compute block")
    p_src.add_argument("file")
    p_src.add_argument("--lang", default="python", help="python, cuda, wgsl, msl")
    sub.add_parser("devices", help="list compute devices")
    args = parser.parse_args(argv)

    from . import compile as compile_program, compute_devices, run
    try:
        if args.command == "devices":
            for d in compute_devices():
                print("  ".join(f"{k}={v}" for k, v in d.items()))
            return 0
        try:
            source = open(args.file, encoding="utf-8").read()
        except OSError as err:
            print(f"zynbook: cannot read {args.file}: {err.strerror}", file=sys.stderr)
            return 2
        if args.command == "check":
            compile_program(source)
        elif args.command == "cir":
            print(compile_program(source).cir_text())
        elif args.command == "source":
            for text in compile_program(source).sources(args.lang):
                print(text)
        elif args.command == "run":
            value = run(source, device=args.device)
            if value is not None:
                print(_show(value))
    except ZynMLError as err:
        print(f"{args.file}: {err.render()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _show(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


if __name__ == "__main__":
    sys.exit(main())
