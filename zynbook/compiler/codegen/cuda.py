"""CIR -> CUDA C.

`render_cuda(kernel, sizes)` returns a `CudaProgram`: the source text (the CUDA dialect,
codegen/dialects/cuda.py, printing the launch IR a schedule of compiler/schedules/ built,
with the sizes compiled in), the launches to make in order, the scratch memory they need
and, for a program with 16-byte vector accesses, the launches of its fallback for buffers
that are not aligned. The attention schedule is tried first for an attention kernel, the
GEMM schedule for any other but a reduce (codegen/cstyle.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import cir, schedules
from ..launch import ir
from ..launch.scalar import user_name
from ..targets import cuda_target
from .dialects.cuda import CudaDialect
from .printer import print_program
from .cstyle import rendered, scheduled


@dataclass
class Step:
    func: str
    grid: tuple
    block: tuple
    args: tuple             # "buffers" (inputs then out), "scratch:<name>", "scalars",
                            # "tmap:<name>" (a tensor map made at launch: CudaProgram.tensor_maps)
    smem: int = 0           # dynamic shared memory bytes


@dataclass
class CudaProgram:
    name: str
    source: str
    steps: list
    scratch: dict = field(default_factory=dict)      # name -> (dtype, count)
    schedule: str = ""
    notes: list = field(default_factory=list)
    line_map: dict = field(default_factory=dict)     # generated line (1-based) -> ZynML line
    unaligned_steps: list | None = None              # used when a pointer is not 16-byte aligned
    aligned_buffers: tuple = ()                      # buffers whose alignment the vector path needs
    # compiler/errflag.py: what the kernels may report. Every kernel takes the flag pointer
    # `int* zyn_err` as its last parameter (after the step's arguments)
    error_sites: tuple = ()
    # uses sm_90a's warpgroup MMAs: compiled for compute_90a (ir.Program.arch_specific)
    arch_specific: bool = False
    # name -> (buffer's place among inputs then out, dtype, dims, strides, box): ir.TensorMap
    # with the sizes evaluated, made from the buffer's address at launch
    tensor_maps: dict = field(default_factory=dict)
    covers_output: bool = False         # ir.Program.covers_output: the output needs no zeroing
    strided_ok: tuple = ()              # ir.Program.strided_ok: inputs read where their view lies


def render_cuda(kernel: cir.Kernel, sizes: dict, arch: tuple = (9, 0), options: dict | None = None,
                multiprocessors: int = 0, bulk_copy: bool = True) -> CudaProgram:
    """Render `kernel` for one binding of its sizes on a device of compute capability `arch`
    with `multiprocessors` (0: unknown), whose driver makes tensor maps where `bulk_copy`.
    Raises ZynMLDeviceError if impossible.
    `options["params"]`, a schedules.Choice, builds that schedule with those parameters."""
    target = cuda_target(arch, multiprocessors, bulk_copy)
    return rendered(kernel, sizes, "CUDA", lambda sizes: scheduled(
        kernel, target, sizes, dict(options or {}),
        lambda notes, **how: _launch_program(kernel, sizes, notes, target, **how), gemm_first=True))


def _launch_program(kernel, sizes, notes, target, only=None, exclude=(), params=None) -> CudaProgram | None:
    """The kernel through a schedule of compiler/schedules/ and the CUDA dialect; a program
    with vector accesses carries its fallback for buffers that are not 16-byte aligned."""
    prog = schedules.build(kernel, target, sizes, params, only=only, exclude=exclude)
    if prog is None:
        return None
    both = prog if prog.fallback is None else ir.Program(
        prog.name, prog.kernels + prog.fallback.kernels, prog.launches, prog.scratch, prog.sites,
        prog.schedule)
    out = print_program(CudaDialect(), both, kernel, {user_name(d): sizes[d] for d in kernel.dims})

    def steps(p):
        return [Step(l.kernel, (int(ir.evaluate(l.grid, sizes)), 1, 1), (l.block, 1, 1),
                     _step_args(p.kernel(l.kernel)), p.kernel(l.kernel).dynamic_shared)
                for l in p.launches]
    scratch = {s.name: (s.dtype, int(ir.evaluate(s.count, sizes))) for s in prog.scratch}
    names = {user_name(b.name): b.name for b in list(kernel.inputs) + [kernel.output]}
    return CudaProgram(prog.kernels[0].name, out.source, steps(prog), scratch, schedule=prog.schedule,
                       notes=notes + prog.notes, line_map=out.line_map,
                       unaligned_steps=steps(prog.fallback) if prog.fallback else None,
                       aligned_buffers=tuple(names[a] for a in prog.aligned),
                       error_sites=prog.sites, arch_specific=prog.arch_specific,
                       covers_output=prog.covers_output, strided_ok=prog.strided_ok,
                       tensor_maps={m.name: (list(names).index(m.buffer), m.dtype,
                                             tuple(int(ir.evaluate(d, sizes)) for d in m.dims),
                                             tuple(int(ir.evaluate(d, sizes)) for d in m.strides), m.box)
                                    for m in prog.tensor_maps})


def _step_args(k) -> tuple:
    """A launch's arguments in its kernel's parameter order (sizes are compiled in)."""
    out = []
    for p in k.params:
        a = {"buffer": "buffers", "scalar": "scalars"}.get(
            p.kind, f"{'tmap' if p.kind == 'tensormap' else 'scratch'}:{p.name}")
        if p.kind != "size" and (":" in a or a not in out):
            out.append(a)
    return tuple(out)
