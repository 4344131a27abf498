"""What the C-like renderers (CUDA C, Metal, C++) share around the schedules: which schedule
they ask for, the error a renderer raises where none takes a kernel, and how it reaches the
user (a ZynML device error at the kernel's line)."""
from __future__ import annotations

from .. import cir
from ...errors import ZynMLDeviceError, Span
from ..errflag import column_of


class Unsupported(Exception):
    """The renderer cannot express this CIR (raised as a ZynML error by the device)."""

    def __init__(self, message: str, line: int = 0):
        super().__init__(message)
        self.line = line


def no_schedule(kernel, target, sizes):
    """Raise the reason no schedule of compiler/schedules/ takes `kernel` on `target`."""
    from .. import schedules
    raise Unsupported(*schedules.refusal(kernel, target, sizes))


def rendered(kernel: cir.Kernel, sizes: dict, lang: str, render):
    """`render(sizes)` for a binding of every size of `kernel`; what it cannot compile is a
    ZynML device error naming `lang`."""
    sizes = {k: int(v) for k, v in sizes.items()}
    try:
        missing = [d for d in kernel.dims if d not in sizes]
        if missing:
            raise Unsupported(f"sizes not bound: {', '.join(missing)}")
        return render(sizes)
    except Unsupported as err:
        # at the statement it refused where known (its first character), else the block
        span = Span(err.line, column_of(kernel.source, kernel.first_line, err.line)) \
            if err.line else cir.block_span(kernel)
        raise ZynMLDeviceError(f"the {lang} renderer cannot compile kernel `{kernel.name}`: {err}",
                               span) from None


def scheduled(kernel: cir.Kernel, target, sizes: dict, options: dict, launch,
              gemm_first: bool = False):
    """The program `launch(notes, only=, exclude=, params=)` builds, or None: with the
    schedule `options["params"]` names, else the attention schedule for an attention kernel
    (and, `gemm_first`, the GEMM schedule for any other but a reduce), else the first schedule
    that applies (`options["generic"]`: neither attention nor GEMM)."""
    kind = kernel.kernel_type.kind
    generic = options.get("generic")
    notes: list = []
    if options.get("params") is not None:
        return launch(notes, params=options["params"]) or no_schedule(kernel, target, sizes)
    if kind in ("attention", "flash_attention") and not generic:
        prog = launch(notes, only="attention")
        if prog is not None:
            return prog
    if gemm_first and kind != "reduce" and not generic:
        prog = launch(notes, only="gemm")
        if prog is not None:
            return prog
        if kind in ("matmul", "batched_matmul", "conv2d"):
            from ..schedules import Gemm
            notes.append(f"the body of this `{kind}` kernel is not a plain contraction "
                         f"(out = init + sum of products) the GEMM schedule takes "
                         f"({Gemm().why_not(kernel, target, sizes)}); "
                         "it runs on the generic schedule")
    exclude = ("attention", "gemm") if generic else ()
    return launch(notes, exclude=exclude) or no_schedule(kernel, target, sizes)


def sized_source(kernel: cir.Kernel, sizes: dict | None, lang: str, render) -> str:
    """`render(sizes)`, the source of `kernel` with its sizes compiled in: without `sizes`,
    only a kernel whose sizes are all fixed renders; otherwise the text says so."""
    if sizes is None and kernel.dims:
        return (f"// kernel `{kernel.name}`: {lang} is generated at launch, with the sizes "
                f"({', '.join(kernel.dims)}) of that launch compiled in")
    return render(sizes or {})
