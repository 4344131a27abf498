"""The `zynbook` command: check, show the CIR or generated code of, or run a ZynML file."""
from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys

from .errors import ZynMLError

LANGUAGES = ("python", "c", "cuda", "wgsl", "msl", "launch-ir")


def _shape_arg(text: str):
    """`x=1000`, `A=64x32`, `h=4x8:f16` -> (name, shape, dtype): an input bound to seeded
    standard-normal data of that shape (and dtype, f32 by default)."""
    m = re.fullmatch(r"([A-Za-z_]\w*)=(\d+(?:[x,]\d+)*)(?::(\w+))?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(
            f"expected NAME=SHAPE[:DTYPE], e.g. x=1000 or A=64x32:f16, not {text!r}")
    from .compiler.types import canonical_dtype
    dtype = canonical_dtype(m.group(3) or "f32")
    if dtype is None:
        raise argparse.ArgumentTypeError(f"unknown dtype {m.group(3)!r} in {text!r}")
    return m.group(1), tuple(int(d) for d in re.split("[x,]", m.group(2))), dtype


def _weights_arg(text: str):
    """`model=weights.safetensors` -> (name, path): a record read with load_weights."""
    name, sep, path = text.partition("=")
    if not sep or not name.isidentifier() or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE.safetensors, not {text!r}")
    return name, path


def _bound_inputs(shapes, weights=()) -> dict:
    import numpy as np
    from .compiler.types import NUMPY_NAMES
    from .runtime.bf16 import rounded
    from .runtime.tensor import Tensor
    rng = np.random.default_rng(0)
    bound = {}
    for name, shape, dtype in shapes:
        values = rng.standard_normal(shape, dtype=np.float32)
        # (numpy has no bf16: a bf16 tensor holds its bf16 values in f32)
        bound[name] = Tensor(rounded(values), dtype="bf16") if dtype == "bf16" else \
            values.astype(NUMPY_NAMES[dtype])
    if weights:
        from .nn.weights import load_weights
        bound.update({name: load_weights(path) for name, path in weights})
    return bound


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zynbook", description="ZynML compute kernels")
    sub = parser.add_subparsers(dest="command", required=True)
    shape_help = ("bind an input the program does not define to random data of this shape "
                  "(NAME=SHAPE[:DTYPE], e.g. x=1000, A=64x32:f16); repeatable")
    weights_help = ("bind a name to the record of tensors a safetensors file holds "
                    "(NAME=FILE, e.g. model=weights.safetensors); repeatable")
    p_check = sub.add_parser("check", help="parse and check a program; silent when it is good")
    p_check.add_argument("file", help="the program (- reads it from standard input)")
    p_cir = sub.add_parser("cir", help="print the Compute IR of every compute block")
    p_cir.add_argument("file", help="the program (- reads it from standard input)")
    p_cir.add_argument("--before-passes", action="store_true",
                       help="the CIR as lowered, before the pass pipeline (compiler/passes/)")
    p_run = sub.add_parser("run", help="run a program and print its last value")
    p_run.add_argument("file", help="the program (- reads it from standard input)")
    p_run.add_argument("--device", default="cpu", help="cpu, cpu:native, cuda:0, vulkan:0, auto, ...")
    p_run.add_argument("--shape", action="append", type=_shape_arg, default=[], help=shape_help)
    p_run.add_argument("--weights", action="append", type=_weights_arg, default=[],
                       help=weights_help)
    p_src = sub.add_parser(
        "source", help="print the generated code of every compute block",
        description="Runs the program's host part on the CPU reference to learn the sizes of "
                    "each compute block (CUDA, C++ and MSL compile sizes in), then prints the "
                    "code generated for them.")
    p_src.add_argument("file", help="the program (- reads it from standard input)")
    p_src.add_argument("--lang", default="python", choices=LANGUAGES, metavar="LANG",
                       help="one of: " + ", ".join(LANGUAGES))
    p_src.add_argument("--shape", action="append", type=_shape_arg, default=[], help=shape_help)
    p_src.add_argument("--weights", action="append", type=_weights_arg, default=[],
                       help=weights_help)
    sub.add_parser("devices", help="list compute devices")
    p_exp = sub.add_parser(
        "export", help="write a notebook as a self-contained HTML page that runs its compute "
                       "blocks on the reader's GPU (WebGPU)",
        description="Runs the notebook's code once on the CPU reference, then writes an HTML "
                    "page holding each compute block's WGSL, launch plan, inputs and output; "
                    "the page runs them on the reader's GPU and checks the results, with no "
                    "server and no Python.")
    p_exp.add_argument("file", help="NOTEBOOK.ipynb")
    p_exp.add_argument("-o", "--output", help="the page to write (default: NOTEBOOK.html)")
    return parser


def _read_source(path: str) -> str:
    """The program in file `path`, or on standard input where `path` is `-`, as Unix tools
    read it. utf-8-sig: a file an editor saved with a byte order mark reads as its text."""
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8-sig")
    with open(path, encoding="utf-8-sig") as f:
        return f.read()


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from . import compile as compile_program, compute_devices, run
    try:
        if args.command == "devices":
            for d in compute_devices():
                print("  ".join(f"{k}={v}" for k, v in d.items()))
            return 0
        if args.command == "export":
            from .export import export_notebook
            try:
                print(export_notebook(args.file, args.output))
            except OSError as err:
                print(f"zynbook: cannot export {args.file}: {err.strerror or err}",
                      file=sys.stderr)
                return 1
            return 0
        try:
            source = _read_source(args.file)
            if args.file == "-":
                args.file = "<stdin>"       # (what messages name)
        except OSError as err:
            print(f"zynbook: cannot read {args.file}: {err.strerror}", file=sys.stderr)
            return 2
        except UnicodeDecodeError as err:
            print(f"zynbook: {args.file} is not UTF-8 text (byte {err.start}: "
                  f"{err.object[err.start:err.start + 1]!r})", file=sys.stderr)
            return 2
        if args.command == "check":
            compile_program(source)
        elif args.command == "cir":
            print(compile_program(source).cir_text(before_passes=args.before_passes))
        elif args.command == "source":
            program = compile_program(source)
            missing = sorted(set(program.free_names) - {name for name, _, _ in args.shape}
                             - {name for name, _ in args.weights})
            if missing and program.kernels:
                print(f"zynbook: {args.file} takes input(s) {', '.join(missing)}: give their "
                      f"shapes with --shape NAME=SHAPE, e.g. --shape {missing[0]}=1000",
                      file=sys.stderr)
                return 2
            for text in _sized_sources(source, args.lang,
                                       _bound_inputs(args.shape, args.weights)):
                print(text)
        elif args.command == "run":
            value = run(source, device=args.device, **_bound_inputs(args.shape, args.weights))
            if value is not None:
                print(_show(value))
    except ZynMLError as err:
        print(f"{args.file}: {err.render()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _sized_sources(source: str, language: str, inputs: dict) -> list:
    """The code of every compute block the program launches, rendered for the sizes it
    launches with: the program runs once on the CPU reference (its prints are dropped)."""
    from .compiler.codegen import launch_ir_text, render_text
    from .session import Session
    session = Session("cpu")
    with contextlib.redirect_stdout(io.StringIO()):
        session.run(source, **inputs)
    texts, seen = [], set()
    for compiled in session.last_kernels:
        key = (compiled.name, tuple(sorted(compiled.sizes.items())))
        if key in seen:
            continue
        seen.add(key)
        if language == "launch-ir":         # the schedule's program for a CUDA GPU
            texts.append(launch_ir_text(compiled.kernel, None, compiled.sizes))
        else:
            texts.append(render_text(language, compiled.kernel, compiled.sizes))
    return texts


def _show(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


if __name__ == "__main__":
    sys.exit(main())
