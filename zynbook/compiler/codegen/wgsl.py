"""CIR -> WGSL: one WebGPU compute program per ZynML kernel.

A kernel's launch IR, built by compiler/schedules/ for a WebGPU target, is printed by the
WGSL dialect (codegen/dialects/wgsl.py) into the `Program` the device runs: the module's
text, its bindings, the passes to dispatch, the uniform struct of sizes and scalar
arguments, scratch buffers and the error sites. Pure text: no adapter is needed.

Where a schedule can, the program serves every launch whose sizes have the pattern of equal
and negative sizes the options give (sizes are uniforms; grids and scratch sizes host
expressions over them). A schedule that lays work out by a size (rows of a workgroup, tile
values in workgroup arrays) builds for the sizes of one launch instead (`sized_for`), and
the device compiles one program per size set.

Integer indices are `i32`; a launch whose indices would pass 2^31 is refused before it runs
(`Program.check`). Buffers of dtypes WGSL cannot store (bool, 8/16/64-bit ints, f64 without
`shader-f64`) are stored widened or narrowed as `ProgramBinding.storage` says, and the device
converts on upload and download.
"""
from __future__ import annotations

import dataclasses as dc
from dataclasses import dataclass, field
from math import prod
from typing import Callable

from .. import cir
from ...errors import ZynMLDeviceError
from .dialects.wgsl import F64_MATH

# ----------------------------------------------------------------------------- options


@dataclass(frozen=True)
class WGSLOptions:
    """What the target adapter offers; part of the pipeline cache key."""
    workgroup_size: int = 256
    f16: bool = False                      # the adapter has `shader-f16`
    subgroups: bool = False                # the adapter has `subgroups`
    # standard WGSL declares `enable subgroups;`; Naga (wgpu-native) takes subgroup
    # operations from the device's feature and refuses the directive
    subgroups_directive: bool = True
    max_workgroup_storage: int = 16384     # bytes (WebGPU's guaranteed minimum)
    max_invocations: int = 256
    max_storage_buffers: int = 8
    # groups of size names equal at the launch this program is for: the bounds analysis
    # (passes/bounds.py) then proves `x[i]`, i in 0..len, in range of an axis `x_d0`
    equal_sizes: tuple = ()
    # size names negative at that launch (a host int can be): not assumed >= 0
    negative_sizes: tuple = ()
    f64: bool = False                      # the adapter has `shader-f64`
    # sizes ((name, value) pairs) of one launch, for a kernel no program of every size set
    # serves (`sized_for`): its program is built for these sizes
    launch_sizes: tuple = ()
    # a schedules.Choice the program is built with (a tuning candidate or winner), else
    # the schedules choose
    params: object = None
    # the adapter's name: the target's arch (schedules/configs.py tells its architecture)
    adapter: str = ""
    # register loops written out (constant register indices; see launch/unroll.py)
    write_out_registers: bool = True
    # the width every subgroup the adapter makes has at least, its lanes consecutive local
    # ids (the device's probe; 0: not known): collectives over groups of lanes that wide
    lane_groups: int = 0

    def key(self) -> tuple:
        return tuple(getattr(self, f.name) for f in dc.fields(self))


# ----------------------------------------------------------------------------- program


@dataclass
class ProgramBinding:
    binding: int
    name: str           # WGSL variable name
    buffer: str         # CIR buffer name, or a runtime role: "@params", "@scratch_f32", ...
    access: str         # "read", "read_write", "uniform"
    storage: str        # WGSL element type stored: f32, f16, i32, u32
    dtype: str = ""     # CIR dtype of the buffer (inputs and output)


@dataclass
class ProgramPass:
    entry: str
    workgroups: Callable    # env -> number of workgroups (linear; the device splits it 2-D/3-D)


@dataclass
class ParamField:
    name: str
    wgsl_type: str          # i32 | u32 | f32 | f64
    value: Callable         # env -> number
    label: str = ""         # the size or scalar it holds, as the kernel names it (for errors)


@dataclass
class Program:
    """Everything the device needs to run one kernel."""
    kernel: str
    schedule: str
    source: str
    bindings: list
    passes: list
    params: list            # of ParamField, in struct order
    workgroup_storage: int  # bytes of var<workgroup> the module declares
    workgroup_size: tuple
    notes: list = field(default_factory=list)
    uses_f16: bool = False
    error_sites: tuple = ()     # compiler/errflag.py; the flag is the binding of "@error"
    # scratch buffers by binding role ("@scratch:<name>") -> env -> bytes, one per launch
    scratch_bytes: dict = field(default_factory=dict)
    # env -> why a launch cannot run (its indices would pass i32), or None
    check: Callable | None = None
    # sizes -> whether a loop passes the driver's loop budget at them (`past_budget`)
    past_budget: Callable | None = None

    def param_values(self, env) -> list:
        return [(f.wgsl_type, f.value(env)) for f in self.params]


# The env passed to the host-side callables:
#   env["sizes"]   {size name: int}, env["scalars"] {name: number},
#   env["shapes"]  {CIR buffer name: tuple of ints} (inputs and output)

# ----------------------------------------------------------------------------- dtypes

def storage_type(dtype: str, f16: bool = True) -> str:
    """The WGSL element type a buffer of `dtype` is stored as (the dialect's `storage`). f64
    is kept as 64 bits on every adapter, so f64 data moved through a device without
    `shader-f64` keeps its digits; kernels computing in f64 there are refused (_refuse_f64)."""
    from .dialects.wgsl import storage
    try:
        s = storage(dtype)
    except KeyError:
        raise ZynMLDeviceError(f"dtype {dtype} has no WGSL storage type") from None
    return "f32" if s == "f16" and not f16 else s


# ------------------------------------------------------------------------- entry point

def render(kernel: cir.Kernel, options: WGSLOptions | None = None) -> Program:
    """The WGSL program of `kernel`: its launch IR (compiler/schedules/) printed by the WGSL
    dialect (`launch_program`), for every size set of the options' pattern of equal and
    negative sizes, or for the sizes `options.launch_sizes` gives (`sized_for`)."""
    options = options or WGSLOptions()
    prog = launch_program(kernel, options)
    if prog is None:
        why, span = _why_not_launch(kernel, options)
        raise ZynMLDeviceError(f"no WebGPU program for kernel {kernel.name}: {why}", span)
    return prog


# what 64-bit floats can do in a shader (the dialect's F64_MATH): anything else in an f64
# kernel is refused
_F64_FUNCTIONS = F64_MATH | {"zeros", "ones", "sum", "row_max", "row_sum", "transpose"}


def _refuse_f64(kernel: cir.Kernel, options: WGSLOptions) -> bool:
    """True when the kernel computes in f64, which needs the adapter's `shader-f64`; an f64
    kernel is refused where there is none, or where it needs what f64 shaders lack, never
    computed in f32 and reported as f64."""
    where = [f"`{b.name}`" for b in list(kernel.inputs) + [kernel.output] if b.dtype == "f64"]
    scal = [f"`{s.name}`" for s in kernel.scalars if s.dtype == "f64"]
    if not where and not scal and not any(isinstance(n, cir.Expr) and n.ty.dtype == "f64"
                                          for n in cir.walk(kernel.body)):
        return False
    span = cir.block_span(kernel)
    what = ", ".join(where + scal) or "a value"
    if not options.f64:
        raise ZynMLDeviceError(
            f"this WebGPU adapter has no `shader-f64`: kernel `{kernel.name}` uses f64 ({what} "
            "is f64), which it would compute in 32 bits; run it on `cpu`, `cpu:native` or a "
            "CUDA device, or make it f32", span)
    why = ""
    for n in cir.walk(kernel.body):
        if isinstance(n, cir.Call) and n.ty.dtype == "f64" and n.fn not in _F64_FUNCTIONS:
            if not why:     # the function as written, where it is written
                why, span = f"{n.written or n.fn}() in 64 bits", n.span or span
        if isinstance(n, cir.Atomic):
            why = why or "atomics"
    if why:
        raise ZynMLDeviceError(
            f"WebGPU's f64 shaders cannot run kernel `{kernel.name}`: it needs {why}; run it "
            "on `cpu`, `cpu:native` or a CUDA device", span)
    return True


def render_source(kernel: cir.Kernel, options: WGSLOptions | None = None,
                  sizes: dict | None = None) -> str:
    """The WGSL text of `kernel` (for a launch of `sizes` where given)."""
    options = options or WGSLOptions()
    return render(kernel, sized_for(options, kernel, sizes) if sizes else options).source


# ----------------------------------------------------------- the launch-IR path


def launch_target(options: WGSLOptions):
    """The adapter these options describe, as a compiler/targets.py Target."""
    from ..targets import LLVMPIPE_LOOP_STEPS, webgpu_target
    features = [f for f, on in (("shader-f16", options.f16), ("shader-f64", options.f64),
                                ("subgroup", options.subgroups)) if on]
    return dc.replace(webgpu_target(features, {
        "max_compute_invocations_per_workgroup": min(options.workgroup_size, options.max_invocations),
        "max_compute_workgroup_storage_size": options.max_workgroup_storage}),
        arch=options.adapter,
        loop_steps=LLVMPIPE_LOOP_STEPS if "llvmpipe" in options.adapter.lower() else 0,
        fma_sums=128 if "nvidia" in options.adapter.lower() else 64)


_AS_FLOAT = ("f16", "f32", "f64")       # (bf16's value is its f32's, not spelled apart)
_UNSIGNED = ("u32", "u64")


def host_ints_as_floats(kernel: cir.Kernel) -> tuple:
    """(`kernel`, {name: dtype}): the host ints past i32 (read as i64, lower.py) that the
    kernel uses only as floats of one dtype (`x[i] * k` of f32 x, `f32(k)`, `k < x[i]`)
    made scalar arguments of that dtype, their values converted on the host as the
    program converts them (`host_float`): WGSL has no i64 to hold them, and a float needs
    none. Those used only beside u32 (u64) data, as that dtype (`u[i] + k`: lower.py), are
    u32 scalar arguments likewise (a u64's value checked to fit them: `_i32_check`). Those
    used as other integers stay sizes (and are refused: `_i32_check`)."""
    wide = {d for d in kernel.dims if any(
        isinstance(n, cir.Cast) and n.ty.dtype == "i64" and n.operand == cir.Var(d, cir.Ty("i32"))
        for n in cir.walk(kernel.body))}
    moved, seen = _floats_of(kernel, wide)
    left = {n.name for n in cir.walk(moved.body) if isinstance(n, cir.Var) and
            n.name in wide and n.ty.dtype == "i32"}
    floats = {d: next(iter(ts)) for d, ts in seen.items() if len(ts) == 1 and d not in left}
    if not floats:
        return kernel, {}
    if set(seen) != set(floats):
        moved, _ = _floats_of(kernel, set(floats))
    return dc.replace(moved, dims=tuple(d for d in moved.dims if d not in floats), scalars=(
        moved.scalars + tuple(cir.Scalar(d, "u32" if t in _UNSIGNED else t)
                              for d, t in sorted(floats.items())))), floats


def _floats_of(kernel: cir.Kernel, names: set) -> tuple:
    """(`kernel` with the host ints `names` read as i64 replaced by a float Var where the
    expression around converts them to a float, {name: the float dtypes it is read as})."""
    from ..passes.simplify import rewrite_exprs
    seen: dict = {}

    def as_float(e, dtype, unsigned=False):
        if not (isinstance(e, cir.Cast) and e.ty.dtype == "i64" and isinstance(e.operand, cir.Var)
                and e.operand.name in names and (dtype in _AS_FLOAT or
                                                 unsigned and dtype in _UNSIGNED)):
            return e
        seen.setdefault(e.operand.name, set()).add(dtype)
        if dtype == "u64":      # (held in a u32, as u64 data is)
            return cir.Cast(cir.Var(e.operand.name, cir.Ty("u32")), cir.Ty(dtype))
        return cir.Var(e.operand.name, cir.Ty(dtype))

    def rule(e):
        if e.ty.shape:
            return e
        if isinstance(e, cir.Cast):
            got = as_float(e.operand, e.ty.dtype, unsigned=True)
            return got if got is not e.operand else e
        if isinstance(e, cir.Bin):
            floats = [x.ty.dtype for x in (e.left, e.right) if x.ty.dtype in _AS_FLOAT]
            dt = e.ty.dtype if e.ty.dtype != "bool" else \
                ("f64" if "f64" in floats else floats[0]) if floats else None
            return dc.replace(e, left=as_float(e.left, dt), right=as_float(e.right, dt))
        if isinstance(e, cir.Select):
            return dc.replace(e, if_true=as_float(e.if_true, e.ty.dtype),
                              if_false=as_float(e.if_false, e.ty.dtype))
        return e
    return rewrite_exprs(kernel, rule), seen


def host_float(value, dtype: str) -> float:
    """Host int `value` converted to float `dtype` as numpy converts an int64 (rounded once);
    to u32 or u64 it is itself (the launch checks it fits)."""
    if dtype in _UNSIGNED:
        return int(value)
    import numpy as np
    with np.errstate(over="ignore"):
        return float(np.array(value, np.int64).astype({"f16": np.float16, "f32": np.float32,
                                                       "f64": np.float64}[dtype]))


def _sizes(kernel: cir.Kernel, options: WGSLOptions) -> dict:
    """The sizes a program is built for: the launch's (`sized_for`), else sizes of the
    options' pattern of equal and negative sizes."""
    from ..launch.scalar import pattern_sizes
    if options.launch_sizes:
        return {k: int(v) for k, v in options.launch_sizes if k in kernel.dims}
    return pattern_sizes(kernel.dims, options.equal_sizes, options.negative_sizes)


def _why_not_launch(kernel: cir.Kernel, options: WGSLOptions) -> tuple:
    """(why no schedule of compiler/schedules/ gives `kernel` a program on this adapter,
    the span of the statement the dialect could not spell, or None)."""
    from .. import schedules
    from .dialects.wgsl import WgslDialect
    from .printer import print_program
    sizes = _sizes(kernel, options)
    for n in cir.walk(kernel.body):
        # a host int past i32 is read as i64 (lower.py): name it, not the i64 it became
        if isinstance(n, cir.Cast) and n.ty.dtype == "i64" and isinstance(n.operand, cir.Var) \
                and n.operand.name in kernel.dims:
            v = dict(options.launch_sizes or ()).get(n.operand.name)
            return (f"the host int `{n.operand.name}`{'' if v is None else f' = {v}'} is past "
                    f"the 32-bit integers kernel {kernel.name} computes with on WebGPU (-2^31 "
                    "to 2^31 - 1); run it on `cpu`, `cpu:native` or a CUDA device"), None
    first = None
    for target, _ in _launch_targets(kernel, options):
        prog = schedules.build(kernel, target, sizes)
        if prog is None:
            # (the target with the launch's sizes may build one the dialect refuses: that
            # says more than why a program of every size set was not built, and so does
            # why it builds none: a reduce kernel's shared arrays too large for a thread)
            first = schedules.why_none(kernel, target, sizes)
            continue
        try:            # what the dialect refused (64-bit integer arithmetic, a dtype)
            print_program(WgslDialect(f16=options.f16, max_storage_buffers=options.max_storage_buffers,
                                      f64=options.f64, loop_budget=bool(target.loop_steps)),
                          prog, kernel)
        except ZynMLDeviceError as e:
            return (f"{e.message}; run it on `cpu`, `cpu:native` or a CUDA device",
                    e.span if e.span.line else None)
    if first is not None:
        return first, None
    return "the WGSL dialect cannot spell the program the schedule built" + (
        "" if options.launch_sizes else ", or it needs the sizes of the launch"), None


def launch_program(kernel: cir.Kernel, options: WGSLOptions) -> Program | None:
    """The Program of `kernel` for every size set of the options' pattern, else, given
    `options.launch_sizes`, one laid out for those sizes (`_launch_targets`). None where no
    schedule applies or the dialect cannot spell what it built (64-bit integers, f64, f16
    without `shader-f16`...). Built once per kernel and options: a launch asks whether one
    serves every size set, whether its limits pass, and then for the program itself."""
    key = (kernel.stable_hash(), kernel.name, options.key())
    if key not in _PROGRAMS:
        if len(_PROGRAMS) >= 256:
            _PROGRAMS.pop(next(iter(_PROGRAMS)))
        _PROGRAMS[key] = _launch_program(kernel, options)
    return _PROGRAMS[key]


_PROGRAMS: dict = {}


def _launch_program(kernel: cir.Kernel, options: WGSLOptions) -> Program | None:
    from ..launch import ir as lir
    from ..launch.scalar import user_name
    kernel, floats = host_ints_as_floats(kernel)
    sizes = _sizes(kernel, options)
    if any(d not in sizes for d in kernel.dims):
        return None
    _refuse_f64(kernel, options)
    got = spare = None
    for target, baked in _launch_targets(kernel, options):
        got = _printed(kernel, target, sizes, baked, options)
        # a program of every size set whose limits the launch's sizes pass, or whose
        # schedule has a better algorithm for them, gives way to one built for them
        if got is not None and (baked or not options.launch_sizes or not (
                past_limits(got[0].sites, sizes) or _wants_launch_sizes(kernel, options, sizes))):
            if baked or not options.launch_sizes or not past_budget(got[0], target, sizes):
                break
            # its loops pass the driver's budget at these sizes: one built for them
            # unrolls them further, and where none is, this one runs (and checks them)
            spare = (got, target)
        got = None
    if got is None and spare is not None:
        got, target = spare
    if got is None:
        return None
    prog, dialect, out, bindings = got
    names = {user_name(b.name): b.name for b in list(kernel.inputs) + [kernel.output]}
    scalars = {user_name(s.name): s.name for s in kernel.scalars}
    dims = {user_name(d): d for d in kernel.dims}
    params = []
    for field_name, wgsl_type, p in dialect.uniforms:
        where, name = ("sizes", dims[p.name]) if p.kind == "size" else ("scalars", scalars[p.name])
        num = float if p.kind != "size" and wgsl_type in ("f32", "f64") else int
        if name in floats:          # a host int the program reads as a float
            where, num = "sizes", (lambda v, t=floats[name]: host_float(v, t))
        params.append(ParamField(field_name, wgsl_type,
                                 lambda env, w=where, n=name, num=num: num(env[w][n]), name))
    program_bindings = [ProgramBinding(n, name, names.get(role, role), access, elem,
                                       dtype if role in names else "")
                        for n, name, role, access, elem, dtype in bindings]
    env_sizes = (lambda env: {user_name(k): int(v) for k, v in env["sizes"].items()})
    passes = [ProgramPass(launch.kernel,
                          (lambda env, g=launch.grid: int(lir.evaluate(g, env_sizes(env)))))
              for launch in prog.launches]
    scratch_bytes = {"@scratch:" + sc.name: (
        lambda env, sc=sc: int(lir.evaluate(sc.count, env_sizes(env))) * (
            8 if sc.dtype == "f64" else 4)) for sc in prog.scratch}
    if dialect.workgroup_bytes > options.max_workgroup_storage:
        raise ZynMLDeviceError(
            f"kernel {kernel.name} needs {dialect.workgroup_bytes} bytes of workgroup memory; "
            f"this adapter allows {options.max_workgroup_storage}")
    first = prog.kernels[0]
    source = out.source
    if dialect.block_fns and options.subgroups_directive:
        source = "enable subgroups;\n" + source
    return Program(kernel.name, prog.schedule, source, program_bindings, passes, params,
                   dialect.workgroup_bytes, (first.block, 1, 1), list(prog.notes),
                   dialect.uses_f16, prog.sites, scratch_bytes,
                   _i32_check(kernel, prog, env_sizes),
                   lambda sizes, prog=prog, target=target: past_budget(prog, target, sizes))


def _check_tile(kernel: cir.Kernel, options: WGSLOptions, sizes: dict):
    """Refuse a `@tile` configuration that does not fit the adapter at a launch's sizes,
    whichever program runs the launch: the program of every size set checks it only where
    head_dim is a constant of the kernel, so an adapter whose launches that program serves
    (no products: OpenGL's) ran a configuration another adapter of the same limit refused."""
    from ..schedules.configs import check_config
    if not {"block_q", "block_kv"} & set(dict(kernel.schedule.tile)):
        return
    target, sched = _baked_choice(kernel, options, sizes)
    if sched is not None:
        check_config(sched.name, kernel, target, sizes)


def schedule_targets(kernel: cir.Kernel, options: WGSLOptions) -> list:
    """(target, sizes) that `launch_program` builds `kernel` with, in the order it tries
    them (a tuner searches the space of the first whose schedule applies)."""
    sizes = _sizes(kernel, options)
    targets = [(target, sizes) for target, _ in _launch_targets(kernel, options)]
    if options.launch_sizes and _wants_launch_sizes(kernel, options, sizes):
        targets.reverse()       # the program built for these sizes is the one launched
    return targets


def _launch_targets(kernel: cir.Kernel, options: WGSLOptions):
    """(target, sizes baked) to build for, best first: one program for every size set, then
    (given the launch's sizes) one for these sizes, which a schedule that lays work out by
    a size (rows, block arrays) needs. A kernel of no sizes (0-d tensors only) has one size
    set, so the program for it serves every launch."""
    target = _target(options)
    every = [(target, False)]
    if options.launch_sizes or not kernel.dims:
        every.append((_baked(target), True))
    return every


def _baked(target):
    """`target` building for the sizes of one launch."""
    return dc.replace(target, symbolic_sizes=False)


def _baked_choice(kernel: cir.Kernel, options: WGSLOptions, sizes: dict) -> tuple:
    """(the adapter's target with `sizes` baked in, the schedule it would build `kernel`
    with there, or None)."""
    from .. import schedules
    target = _baked(_target(options))
    return target, schedules.chosen(kernel, target, sizes)


def _target(options: WGSLOptions):
    # subgroups are not warps of a width a schedule knows: block all-reductions, and
    # collectives over groups of lanes no wider than every subgroup
    return dc.replace(launch_target(options), warp=1, collectives=False,
                      lane_groups=options.lane_groups if options.subgroups else 0)


def _wants_launch_sizes(kernel: cir.Kernel, options: WGSLOptions, sizes: dict) -> bool:
    """Whether the schedule of `kernel` has a better algorithm for a launch's own sizes
    than for every size set (attention's register-tiled products): the device then compiles
    a program per size set."""
    key = (kernel.stable_hash(), options.key(), tuple(sorted(sizes.items())))
    if key not in _WANTS_SIZES:
        target, sched = _baked_choice(kernel, options, sizes)
        if len(_WANTS_SIZES) >= 4096:       # one entry a size set: kept bounded
            _WANTS_SIZES.pop(next(iter(_WANTS_SIZES)))
        _WANTS_SIZES[key] = sched is not None and sched.wants_launch_sizes(kernel, target, sizes)
    return _WANTS_SIZES[key]


_WANTS_SIZES: dict = {}


def _printed(kernel: cir.Kernel, target, sizes: dict, baked: bool, options: WGSLOptions):
    """(launch IR, dialect, printed program, bindings) of `kernel` on `target`, or None where
    no schedule builds it or the WGSL dialect cannot spell what one built. Not `baked`: the
    program must be the one of every size set of the pattern of `sizes`."""
    from .. import schedules
    from ..launch.scalar import pattern_sizes, size_pattern
    from .dialects.wgsl import AdapterLimit, WgslDialect
    from .printer import print_program
    prog = schedules.build(kernel, target, sizes, options.params)
    if prog is None:
        return None
    if not baked:
        # a schedule that read a size's value would build another program for other values
        equal, negative = size_pattern(kernel, sizes)
        other = pattern_sizes(kernel.dims, equal,
                              tuple(d for d in kernel.dims if d not in negative), base=7919)
        if schedules.build(kernel, target, other, options.params) != prog:
            return None
    dialect = WgslDialect(f16=options.f16, max_storage_buffers=options.max_storage_buffers,
                          f64=options.f64, write_out=options.write_out_registers,
                          loop_budget=bool(target.loop_steps))
    try:
        out = print_program(dialect, prog, kernel)
    except AdapterLimit:
        raise
    except ZynMLDeviceError:
        return None
    return prog, dialect, out, dialect.bindings(prog)


def needs_launch_sizes(kernel: cir.Kernel, options: WGSLOptions) -> bool:
    """Whether the launch IR of `kernel` is built for the sizes of each launch (no program
    serves every size set): the device then compiles one per size set."""
    key = (kernel.stable_hash(), options.key())
    if key not in _NEEDS_SIZES:
        _NEEDS_SIZES[key] = not options.launch_sizes and launch_program(kernel, options) is None
    return _NEEDS_SIZES[key]


_NEEDS_SIZES: dict = {}


def past_limits(sites, sizes: dict) -> bool:
    """Whether `sizes` pass a limit among a program's error sites: a size past the largest
    that a program of every size set holds (an attention kernel's largest head_dim class)."""
    from ..errflag import LIMIT
    return any(s.kind == LIMIT and int(sizes.get(s.buffer, 0)) > s.extent for s in sites)


def past_budget(prog, target, sizes: dict) -> bool:
    """Whether a loop of launch IR `prog` passes the loop budget of `target`'s driver
    (llvmpipe's) at `sizes` more than the unrolled steps of a program of every size set
    take (a row of 600,000 along which one thread finds the argmax): one built for these
    sizes unrolls it further (launch/steps.py)."""
    from ..launch.steps import longest_loop
    return bool(target.loop_steps) and longest_loop(prog, sizes) >= target.loop_steps


def _past_limits(kernel: cir.Kernel, options: WGSLOptions, sizes: dict) -> bool:
    """Whether a launch of `sizes` passes a limit of the program of every size set (or
    its loops the driver's budget): a program built for these sizes runs it instead of
    that one refusing it."""
    if options.launch_sizes:
        return False
    key = (kernel.stable_hash(), options.key())
    if key not in _LIMITS:
        prog = launch_program(kernel, options)
        _LIMITS[key] = (prog.error_sites, prog.past_budget) if prog else ((), None)
    sites, budget = _LIMITS[key]
    return past_limits(sites, sizes) or (budget is not None and budget(sizes))


_LIMITS: dict = {}


def sized_for(options: WGSLOptions, kernel: cir.Kernel, sizes: dict) -> WGSLOptions:
    """`options` for a launch of `sizes`: with those sizes where no program of `kernel`
    serves every size set (a program per size set, `needs_launch_sizes`). A `@tile` that
    does not fit at these sizes is a ZynMLDeviceError here."""
    _check_tile(kernel, options, sizes)
    if options.launch_sizes or not (needs_launch_sizes(kernel, options) or _past_limits(
            kernel, options, sizes) or _wants_launch_sizes(kernel, options, sizes)):
        return options
    return dc.replace(options, launch_sizes=tuple(sorted(
        (k, int(v)) for k, v in sizes.items() if k in kernel.dims)))


I32_LIMIT = 2 ** 31 - 1


def _i32_check(kernel: cir.Kernel, prog, env_sizes) -> Callable:
    """env -> why this launch cannot run with 32-bit integers (a host int past them, or a
    size, a buffer or a loop of the program reaching 2^31), else None: the program is
    compiled once for every size, with i32 indices, so a launch that would pass them is
    refused before it runs."""
    from ..launch import ir as lir
    from ..launch.scalar import map_nodes

    def on_host(e):
        """`e` with the thread axes as names the host gives values (`@blocks`, ...)."""
        return map_nodes(e, lambda n: lir.Ref("@" + n.axis, n.dtype)
                         if isinstance(n, lir.Thread) else n)

    def largest(k, env):
        """The largest start, and end plus step, of the loops of kernel `k` the host can
        compute at this launch."""
        local, most = dict(env), 0
        for s in k.body:
            if isinstance(s, lir.Decl) and not s.mutable and s.value is not None:
                try:
                    local[s.name] = lir.evaluate(on_host(s.value), local)
                except (TypeError, KeyError):
                    pass
        for n in lir.walk(k.body):
            if isinstance(n, lir.For):
                for e in ((n.start,), (n.stop, n.step)):
                    try:
                        most = max(most, sum(int(lir.evaluate(on_host(x), local)) for x in e))
                    except (TypeError, KeyError):
                        pass
        return most

    # a size no buffer's shape names is a host int the kernel computes with (`x[i] + k`)
    axes = set()
    for d in (d for b in list(kernel.inputs) + [kernel.output] for d in b.shape):
        axes |= {d} if isinstance(d, str) else {n.name for n in cir.walk(d)
                                                 if isinstance(n, cir.Var)}

    def too_big(what):
        return (f"kernel {kernel.name} is compiled once for every size, with 32-bit indices, "
                f"and this launch passes them ({what} reaches 2^31); run it on `cpu`, "
                "`cpu:native` or a CUDA device, or split it")

    scalar_dtypes = {s.name: s.dtype for s in kernel.scalars}

    def check(env):
        for name, v in env["sizes"].items():
            if name not in kernel.dims:
                # a host int the program reads as a float or a u32 (host_ints_as_floats)
                if scalar_dtypes.get(name) == "u32" and not 0 <= int(v) < 2 ** 32:
                    return (f"the host int `{name}` = {v} is past the 32-bit integers kernel "
                            f"{kernel.name} holds u64 values in on WebGPU (0 to 2^32 - 1); "
                            "run it on `cpu`, `cpu:native` or a CUDA device")
                continue
            if name not in axes:
                if not -I32_LIMIT - 1 <= int(v) <= I32_LIMIT:
                    return (f"the host int `{name}` = {v} is past the 32-bit integers kernel "
                            f"{kernel.name} computes with on WebGPU (-2^31 to 2^31 - 1); run "
                            "it on `cpu`, `cpu:native` or a CUDA device")
            elif abs(int(v)) > I32_LIMIT:
                return too_big(f"the size {name} = {v}")
        for b, shape in env.get("shapes", {}).items():
            n = prod(int(d) for d in shape)
            if n > I32_LIMIT:
                return too_big(f"`{b}` of {n} elements")
        sizes = env_sizes(env)
        for launch in prog.launches:
            grid = int(lir.evaluate(launch.grid, sizes))
            # a dispatch split over dimensions may run up to twice the blocks asked for
            threads = {"@blocks": 2 * grid, "@block": 2 * grid, "@threads": launch.block,
                       "@thread": launch.block}
            most = largest(prog.kernel(launch.kernel), {**sizes, **threads})
            if most > I32_LIMIT:
                return too_big(f"an index of {most}")
        return None
    return check
