"""The launch IR: what a device runs, below the CIR.

A schedule (compiler/schedules/) turns one CIR kernel into a `Program`: the device kernels
(threads, shared and local arrays, barriers, collectives, guarded loads and stores) and the
launches the host makes (grid, block, scratch), all as data. Printers (compiler/codegen/)
spell a Program in one language; the emulator (backends/emulator.py) runs it on the CPU, lane
by lane, so every schedule is checked against the reference without hardware.

Everything is typed and explicit, so that a printer never decides anything:

* every operand of a `Bin` has the result's dtype (comparisons: both the same dtype), every
  conversion is a `Cast`, every literal a `Lit` of its final dtype;
* an index is a flat element offset; one the bounds analysis could not prove in range is
  wrapped in `Checked` (a store is skipped when its `guard` is false), an integer division
  that may fail is a `CheckedDiv`; both report through the error flag (compiler/errflag.py);
* sizes stay symbolic (`Ref` of a size name of kind "size"): the host side of a launch
  (grid, scratch counts) is an expression over them that any device evaluates with
  `evaluate`; a printer may bake the values of one launch in or pass them as uniforms.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

INT_DTYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")

# ----------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Expr:
    pass


@dataclass(frozen=True)
class Lit(Expr):
    value: object               # int, float or bool, already of `dtype`'s kind
    dtype: str


@dataclass(frozen=True)
class Ref(Expr):
    """A local, a loop variable, or a parameter (scalar or size) by name."""
    name: str
    dtype: str


THREAD_AXES = ("thread", "block", "threads", "blocks", "lane", "warp")


@dataclass(frozen=True)
class Thread(Expr):
    """Where a thread runs: its index in the block (`thread`), the block's index in the grid
    (`block`), the block and grid sizes (`threads`, `blocks`), its lane in the warp or
    subgroup (`lane`) and that warp's index in the block (`warp`)."""
    axis: str
    dtype: str = "i32"


@dataclass(frozen=True)
class Load(Expr):
    """Element `index` (flat) of a buffer parameter, a scratch buffer or an array."""
    array: str
    index: Expr
    dtype: str


@dataclass(frozen=True)
class Bin(Expr):
    """ops: + - * / % < <= > >= == != and or; operands of one dtype. On integers `/` and `%`
    truncate as C does (a divisor that may be 0 or -1 is a `CheckedDiv` instead)."""
    op: str
    a: Expr
    b: Expr
    dtype: str


@dataclass(frozen=True)
class Un(Expr):
    """ops: neg, not."""
    op: str
    a: Expr
    dtype: str


# math with the reference's meaning: min/max propagate NaN, fmod is C's, pow2 is a*a;
# on integers: min max abs clamp relu ipow
MATH = ("sin", "cos", "tan", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "floor",
        "ceil", "round", "tanh", "sinh", "cosh", "sigmoid", "relu", "silu", "gelu", "erf",
        "pow", "pow2", "min", "max", "clamp", "fmod", "ipow",
        "ceildiv",                  # ceildiv: host expressions only (grids)
        # f32 only, where a kernel asks for them: 2^x with a result below the smallest normal
        # flushed to 0 (CUDA's ex2.approx.ftz), the larger of two where a NaN yields the other
        # (C's fmaxf: max.f32), x rounded to TF32's 10-bit mantissa (nearest, ties away from
        # zero: cvt.rna.tf32.f32; CUDA only)
        "fast_exp2", "fmax", "tf32",
        "dot",                      # of two vectors (below): the sum of their lanes' products
        # fma(a, b, c): a * b + c of f32 or f64, rounded once where the target has fused
        # multiply-adds, else twice (C++ only: the CPU GEMM's accumulation, schedules/cpu_gemm.py)
        "fma",
        *("wrapping_add", "wrapping_sub", "wrapping_mul"),     # (WRAPPING)
        "wrapping_neg")             # (WRAPPING_NEG)

# signed integer + - * that wrap, for a target whose language leaves overflow undefined
# (Target.signed_wraps): the function and its operator
WRAPPING = {"wrapping_add": "+", "wrapping_sub": "-", "wrapping_mul": "*"}
# and a signed negation that wraps there (-INT_MIN is INT_MIN, as numpy's)
WRAPPING_NEG = "wrapping_neg"


@dataclass(frozen=True)
class Math(Expr):
    fn: str
    args: tuple
    dtype: str


@dataclass(frozen=True)
class Cast(Expr):
    a: Expr
    dtype: str


@dataclass(frozen=True)
class Select(Expr):
    """`a` where `cond` else `b`. Both sides are values: a schedule puts nothing that must
    not run (a check, a load that may be out of range) in the side not taken; that is an
    `If`. (C's `?:` evaluates one side, WGSL's `select` both.)"""
    cond: Expr
    a: Expr
    b: Expr
    dtype: str


@dataclass(frozen=True)
class Checked(Expr):
    """`index` when 0 <= index < extent; otherwise error site `site` fails with the index
    and the value is 0 (a load reads element 0, never memory outside the array)."""
    index: Expr
    extent: Expr
    site: int
    dtype: str


@dataclass(frozen=True)
class InRange(Expr):
    """True when 0 <= index < extent; otherwise error site `site` fails with the index and
    the value is false (the guard of a store that must not be made)."""
    index: Expr
    extent: Expr
    site: int
    dtype: str = "bool"


@dataclass(frozen=True)
class CheckedDiv(Expr):
    """Integer `a / b` or `a % b` truncating as C; by 0 (and MIN / -1) a site fails, 0.
    On a target whose 64-bit integers are held in 32 bits, also i32 `a + b`, `a - b`,
    `a * b` and `a ** b` (b >= 0) of i64 values: an exact value past i32 fails
    `site_overflow` (no zero site)."""
    op: str
    a: Expr
    b: Expr
    site_zero: int
    site_overflow: int
    dtype: str


# fmax: the larger where one is NaN being the other (IEEE maxNum; floats)
COLLECTIVE_OPS = ("+", "*", "max", "min", "and", "or", "fmax")


@dataclass(frozen=True)
class Collective(Expr):
    """The all-reduction of `value` over the threads of a `warp` or a `block`; every thread
    of the group must reach it (block: it contains barriers). `width` (warp scope, a power
    of two below the warp): over each group of that many consecutive lanes instead."""
    op: str
    value: Expr
    scope: str
    dtype: str
    width: int = 0


# ------------------------------------------------------------------------ vectors
# A vector dtype is an element dtype and a lane count, spelled "f32x4". It types locals,
# array elements (an array of vectors is indexed by vector), loads and stores of them, `Bin`
# + - * / (lane by lane, both operands vectors), `Vector`, `Lane` and `Math("dot")`. A
# schedule makes them only where the target computes with vectors (`Target.vector_lanes`).


def vector_dtype(dtype: str, lanes: int) -> str:
    return dtype if lanes == 1 else f"{dtype}x{lanes}"


def lanes_of(dtype: str) -> int:
    """The lane count of a vector dtype; 1 for a scalar one."""
    head, x, n = dtype.rpartition("x")
    return int(n) if x and head in FLOAT_DTYPES + INT_DTYPES and n.isdigit() else 1


def element_of(dtype: str) -> str:
    return dtype.rpartition("x")[0] if lanes_of(dtype) > 1 else dtype


@dataclass(frozen=True)
class Vector(Expr):
    """A vector from its lanes' values (`parts`, one per lane) or one value in every lane."""
    parts: tuple
    dtype: str


@dataclass(frozen=True)
class Lane(Expr):
    """Lane `lane` (a constant) of vector `a`."""
    a: Expr
    lane: int
    dtype: str


# ------------------------------------------------------------------------ statements


@dataclass(frozen=True)
class Stmt:
    pass


@dataclass(frozen=True)
class Decl(Stmt):
    name: str
    dtype: str
    value: Expr | None
    mutable: bool = False
    line: int = 0


@dataclass(frozen=True)
class Set(Stmt):
    name: str
    value: Expr
    line: int = 0


@dataclass(frozen=True)
class Store(Stmt):
    """`array[index] = value`, skipped where `guard` (a bool expression) is false."""
    array: str
    index: Expr
    value: Expr
    guard: Expr | None = None
    line: int = 0


@dataclass(frozen=True)
class For(Stmt):
    """`for var in start..stop step step` (step > 0), var of `dtype`. `unroll`: the trip
    count is a small constant and the body indexes registers by `var` (rows held in
    registers): a target compiler must unroll it to keep them registers."""
    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: tuple
    dtype: str = "i32"
    line: int = 0
    unroll: bool = False
    # (local, op, dtype) of the sums (op "+") and running maxima and minima ("max", "min":
    # NaN-propagating, as Math's) the body only updates (`loop_reductions`): a target may
    # keep a partial one per vector lane, combined in a fixed order (the same result at every
    # launch; a sum rounded otherwise than in sequence, a zero's sign may differ)
    reduce: tuple = ()


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: tuple
    orelse: tuple = ()
    line: int = 0


@dataclass(frozen=True)
class Barrier(Stmt):
    """Every thread of the block waits here; shared arrays written before are visible after
    (`device`: shared arrays spilled to a scratch buffer, which the barrier orders too)."""
    line: int = 0
    device: bool = False


@dataclass(frozen=True)
class NamedBarrier(Stmt):
    """Hardware barrier `id` (1 to 15; 0 is `Barrier`'s) of `threads` threads, a multiple of
    the warp: with `arrive`, this thread counts towards it and goes on; else it also waits
    until `threads` threads arrived; what they accessed in shared memory before is then
    visible to them (FlashAttention-3's turns of two warpgroups' MMAs; the consumers of a
    warp-specialised kernel, whose producer never meets them)."""
    id: Expr
    threads: int
    arrive: bool = False
    line: int = 0


@dataclass(frozen=True)
class Array(Stmt):
    """A fixed-size array of `count` elements: `shared` by the block or `local` to a thread."""
    name: str
    dtype: str
    count: int
    space: str = "local"
    line: int = 0
    align: int = 16             # bytes its start is aligned to (shared: a power of two)
    # shared: placed at the start of shared array `alias` (and over those after it, where the
    # launch provides the block's memory), reusing memory whose uses barriers separate
    alias: str = ""


@dataclass(frozen=True)
class Copy(Stmt):
    """`dst[dst_index + w] = src[src_index + w]` for w in 0..count: one vector access where
    the target has one. The schedule makes both offsets multiples of `count` and lists the
    buffers whose base must be aligned to count elements in `Program.aligned`."""
    dst: str
    dst_index: Expr
    src: str
    src_index: Expr
    count: int
    dtype: str
    line: int = 0


@dataclass(frozen=True)
class Convert(Stmt):
    """`dst[dst_index + w] = Cast(src[src_index + w], dtype)` for w in 0..count (2): f32
    elements of a local array into a local, shared or global array of f16 or bf16, as one
    packed conversion and one 32-bit store where the target has them (CUDA's
    `cvt.rn.f16x2.f32`). Both offsets are multiples of `count`; a global `dst` is listed in
    `Program.aligned`."""
    dst: str
    dst_index: Expr
    src: str
    src_index: Expr
    count: int
    dtype: str                  # of dst: f16 or bf16
    line: int = 0


@dataclass(frozen=True)
class Mma(Stmt):
    """A warp's tensor-core step C += A B on one m x n x k tile (PTX `mma.sync` m16n8k16,
    A row-major, B column-major, f32 C): every lane holds its share of each operand in a local
    array from the given offset, in PTX's fixed layout. With lane = 4 g + t: A's 8 elements
    are (row g + 8 (p % 2), col 2 t + h + 8 (p // 2)) at 2 p + h; B's 4 are (k 2 t + h + 8 p,
    col g) at 2 p + h; C's 4 are (row g + 8 (e // 2), col 2 t + e % 2) at e. Every lane of
    the warp must reach it; only targets with `tensor_cores` print it.

    dtype "tf32" (m16n8k8): A and B hold f32 values, rounded to TF32 (10-bit mantissa,
    nearest, ties away from zero: `cvt.rna.tf32.f32`) by the step; A's 4 elements are
    (row g + 8 (p % 2), col t + 4 (p // 2)) at p, B's 2 are (k t + 4 p, col g) at p."""
    a: str
    a_index: Expr
    b: str
    b_index: Expr
    c: str
    c_index: Expr
    dtype: str                  # of A and B: f16 or bf16, or tf32 (f32 arrays)
    shape: tuple = (16, 8, 16)
    line: int = 0


@dataclass(frozen=True)
class MatrixLoad(Stmt):
    """A warp's load of `count` (1, 2 or 4) 8 x 8 tiles of 16-bit elements from a shared
    array (PTX `ldmatrix`): lanes 8 i .. 8 i + 7 each give the offset of one row (8
    consecutive elements) of tile i (the others an offset as valid, unused); every lane
    receives, per tile i, two elements at dst_index + 2 i: (row l / 4, cols 2 (l % 4) + 0, 1)
    of the tile, or of its transpose with `trans`. Every lane of the warp must reach it; only
    targets with `tensor_cores` print it. dtype f32 (TF32 fragments): a row is 4 elements
    and every lane receives one per tile i, (row l / 4, col l % 4), at dst_index + i; no
    `trans`."""
    dst: str
    dst_index: Expr
    src: str
    src_index: Expr
    count: int
    trans: bool
    dtype: str                  # f16 or bf16, or f32
    line: int = 0


@dataclass(frozen=True)
class AsyncCopy(Stmt):
    """`dst[dst_index + w] = src[src_index + w]` for w in 0..count, from a global buffer into
    a shared array, made in the background (PTX `cp.async`, 4, 8 or 16 bytes): the copy joins
    the thread's open group, and its elements may land any time until an `AsyncWait` finds
    the group complete. Where `guard` is false zeros land instead and `src` is not read.
    Offsets are multiples of `count`; only targets with `async_copy` print it."""
    dst: str
    dst_index: Expr
    src: str
    src_index: Expr
    count: int
    dtype: str
    guard: Expr | None = None
    line: int = 0


@dataclass(frozen=True)
class AsyncCommit(Stmt):
    """The thread's `AsyncCopy`s since the last commit become one group (PTX
    `cp.async.commit_group`; a group may be empty)."""
    line: int = 0


@dataclass(frozen=True)
class AsyncWait(Stmt):
    """The thread waits until at most `pending` of its committed groups, the newest, are
    incomplete (PTX `cp.async.wait_group`); what the others copied is then visible to this
    thread, and to the block after a `Barrier`."""
    pending: int
    line: int = 0


# ---- warpgroup MMA (PTX wgmma, sm_90a): four consecutive warps (a warpgroup) multiply
# operands read straight from shared memory, in the background. Shared tiles it reads use
# the 128-byte swizzle (WGMMA_SWIZZLE): within each 1024-byte atom of eight 128-byte rows,
# the 16-byte unit u of the row at address bits 7-9 = r lies at unit u ^ r, so such a tile's
# array must start 1024-byte aligned (`Array.align`).

WGMMA_SWIZZLE = 128
WGMMA_N = (64, 128, 192, 256)   # the N of the m64nNk16 shapes the GEMM uses
WGMMA_ANY_N = tuple(range(16, 257, 16))     # those the hardware has (16-bit operands), by 16
WGMMA_K = {"f16": 16, "bf16": 16, "tf32": 8}    # the K of a step: 32 bytes of each operand


@dataclass(frozen=True)
class WarpgroupMma(Stmt):
    """`wgmma.mma_async` m64nNkK, f32 accumulators, f16 or bf16 operands (K = 16) or tf32
    (K = 8: f32 elements whose low 13 bits the hardware ignores), both read by the hardware
    from shared memory through 64-bit descriptors. Operand X (a: the 64 x K A, b: the K x N
    B) starts at element `x_index` of shared array `x`; `x_kmajor`: its elements
    run along K within a 128-byte row (else along M or N: the transposed form, f16/bf16
    only: tf32 operands are K-major); `x_lbo`, `x_sbo`: the descriptor's leading and stride byte offsets (K-major: SBO
    between groups of 8 rows of M or N, LBO unused; MN-major: LBO between blocks of 64
    elements of M or N, SBO between groups of 8 rows of K). Thread 32 w + l of the warpgroup
    holds C's elements (row 16 w + l / 4 + 8 (e // 2), col 8 i + 2 (l % 4) + e % 2) at
    c_index + 4 i + e, i < N / 8. The step joins the warpgroup's open group
    (`WarpgroupCommit`); C may be read, and the shared tiles rewritten, only once a
    `WarpgroupWait` finds its group complete. Every thread of the warpgroup must reach it.
    With `a_regs`, A comes from the thread's registers instead: local array `a` holds at
    `a_index` .. + 8 (tf32: + 4) its warp's 16 rows of A (warp w of the warpgroup: rows
    16 w ..) in the layout of `Mma`'s A fragment (a_kmajor, a_lbo and a_sbo unused). Where
    `fresh` is true, D = A B: the accumulators' old values are not read (scale-d 0)."""
    a: str
    a_index: Expr
    a_kmajor: bool
    a_lbo: int
    a_sbo: int
    b: str
    b_index: Expr
    b_kmajor: bool
    b_lbo: int
    b_sbo: int
    c: str
    c_index: Expr
    n: int
    dtype: str                  # f16, bf16 or tf32
    line: int = 0
    a_regs: bool = False
    fresh: Expr | None = None

    @property
    def k(self) -> int:
        return WGMMA_K[self.dtype]


@dataclass(frozen=True)
class WarpgroupFence(Stmt):
    """`wgmma.fence`: registers `c[0 .. count)` written by ordinary instructions (the
    accumulators' zeros), and the A fragments `a[0 .. a_count)` where named, are ready for
    the warpgroup MMAs that follow."""
    c: str
    count: int
    line: int = 0
    a: str = ""
    a_count: int = 0


@dataclass(frozen=True)
class WarpgroupCommit(Stmt):
    """`wgmma.commit_group`: the warpgroup MMAs since the last commit become one group."""
    line: int = 0


@dataclass(frozen=True)
class WarpgroupWait(Stmt):
    """`wgmma.wait_group`: wait until at most `pending` groups, the newest, are incomplete;
    then the others' accumulators `c[0 .. count)` hold their results and their shared
    tiles may be rewritten."""
    pending: int
    c: str
    count: int
    line: int = 0


@dataclass(frozen=True)
class ProxyFence(Stmt):
    """`fence.proxy.async.shared::cta`: what this thread wrote to shared memory by ordinary
    stores or cp.async becomes visible to the asynchronous proxy (the warpgroup MMAs' reads)
    once a barrier follows."""
    line: int = 0


# ---- mbarriers and the tensor memory accelerator (sm_90): a copy engine moves a whole box
# of a tensor into shared memory and counts its bytes on an mbarrier, which threads wait on;
# warp-specialised kernels (schedules/gemm_tma.py) give one warpgroup the copies.


@dataclass(frozen=True)
class Mbarrier(Stmt):
    """The mbarrier at element `index` of a shared u64 array: "init" (a phase completes when
    `count` threads arrived and the bytes expected of it landed), "arrive" (this thread
    arrives; with `tx`, it also expects `tx` bytes of `TensorLoad`s in this phase), "wait"
    (until the phase of parity `parity`, 0 or 1, completed: on a fresh mbarrier, parity 1
    passes at once). What landed before a phase completed is visible to its waiters."""
    op: str
    array: str
    index: Expr
    count: int = 0
    tx: int = 0
    parity: Expr | None = None
    line: int = 0


@dataclass(frozen=True)
class TensorLoad(Stmt):
    """A box of the tensor that tensor map `map` (a kernel parameter of kind "tensormap",
    described by `Program.tensor_maps`) describes, at element coordinates `coords` (innermost
    first), copied by the copy engine into shared array `dst` from element `dst_index` (1024-
    byte aligned), row after row with the 128-byte swizzle (WGMMA_SWIZZLE): elements outside
    the tensor land as zeros. Its bytes complete on the mbarrier `bar[bar_index]`."""
    map: str
    coords: tuple
    dst: str
    dst_index: Expr
    bar: str
    bar_index: Expr
    line: int = 0


@dataclass(frozen=True)
class SetMaxRegisters(Stmt):
    """`setmaxnreg`: this warpgroup's threads keep `count` registers from here on (a producer
    gives its registers up to the MMAs' warpgroups)."""
    count: int
    increase: bool
    line: int = 0


@dataclass(frozen=True)
class TensorMap:
    """A tensor map, made on the host at launch from buffer `buffer`'s address: a tensor of
    `dtype` with `dims` elements (innermost first; host expressions over the sizes) and
    `strides` elements between consecutive indices of dims[1:], read in boxes of `box`."""
    name: str
    buffer: str
    dtype: str
    dims: tuple
    strides: tuple
    box: tuple


@dataclass(frozen=True)
class Atomic(Stmt):
    """`array[index] op= value` as one indivisible update (op in + max min)."""
    op: str
    array: str
    index: Expr
    value: Expr
    guard: Expr | None = None
    line: int = 0


# ----------------------------------------------------------------- kernels and launches


@dataclass(frozen=True)
class Param:
    """kind: "buffer" (an input or the output, `writable`), "scratch", "scalar", "size",
    "tensormap" (a TensorMap of the program, passed by value)."""
    name: str
    kind: str
    dtype: str
    writable: bool = False


@dataclass(frozen=True)
class Kernel:
    """One device entry point run by `block` threads per block."""
    name: str
    params: tuple               # of Param, in launch order
    body: tuple
    block: int
    index_dtype: str = "i32"    # the dtype of flat offsets and thread counters
    comment: str = ""
    min_blocks: int = 0         # blocks a multiprocessor should hold at once (a register cap)
    # bytes of the shared arrays, placed in memory the launch provides (CUDA's dynamic
    # shared memory, beyond what a kernel may declare with fixed sizes); 0: declared so
    dynamic_shared: int = 0


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: Expr                  # the number of blocks: a host expression over the sizes
    block: int


@dataclass(frozen=True)
class Scratch:
    name: str
    dtype: str
    count: Expr                 # elements: a host expression over the sizes


@dataclass
class Program:
    """A whole schedule's output: what a printer spells and a device runs."""
    name: str
    kernels: tuple
    launches: tuple
    scratch: tuple = ()
    sites: tuple = ()           # compiler/errflag.py sites, numbered from 1
    schedule: str = ""          # one line: the schedule and its parameters
    notes: list = field(default_factory=list)
    lines: dict = field(default_factory=dict)     # source line -> ZynML text, for comments
    # buffers whose base address the vector accesses (`Copy`) need aligned to 16 bytes; a
    # device whose buffers are not runs `fallback` (the same schedule without them)
    aligned: tuple = ()
    fallback: "Program | None" = None
    # uses instructions of one architecture only (sm_90a's wgmma): a device compiles it for
    # that architecture's specific variant (compute_90a)
    arch_specific: bool = False
    tensor_maps: tuple = ()     # of TensorMap: made by the device at each launch
    # every element of the output is stored (a schedule that knows it says so): a device
    # need not zero the output first, as it does where some element may be skipped
    covers_output: bool = False
    # inputs (kernel buffer names) the program addresses through their `cir.Buffer.strides`
    # where they have them: a device may hand it such a view instead of a contiguous copy
    strided_ok: tuple = ()

    def kernel(self, name: str) -> Kernel:
        return next(k for k in self.kernels if k.name == name)


# ------------------------------------------------------------------------- helpers


def map_body(stmts, fn) -> tuple:
    """`stmts` with each outermost loop (the branches of ifs walked) replaced by the
    statements `fn(loop, inner)` gives, where `inner(stmts)` maps a body the same way: `fn`
    maps the loops inside it, or not."""
    def inner(body) -> tuple:
        return map_body(body, fn)

    def stmt(s):
        if isinstance(s, If):
            return [replace(s, then=inner(s.then), orelse=inner(s.orelse))]
        return fn(s, inner) if isinstance(s, For) else [s]
    return tuple(out for s in stmts for out in stmt(s))


def map_loops(program: Program, fn) -> Program:
    """`program` with the loops of its kernels mapped by `fn` (`map_body`)."""
    return replace(program, kernels=tuple(replace(k, body=map_body(k.body, fn))
                                          for k in program.kernels))


def walk(node):
    """Every statement and expression under `node` (a node, a tuple, a Kernel or Program),
    in pre-order. (A stack, not nested generators: those pass each node up through every
    level above it, quadratic in the depth of a written-out register loop's expressions.)"""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (tuple, list)):
            stack.extend(reversed(n))
            continue
        if not isinstance(n, (Expr, Stmt, Kernel, Program)):
            continue
        yield n
        if isinstance(n, Program):
            stack.append(n.kernels)
            continue
        parts = [getattr(n, name) for name in n.__dataclass_fields__]
        stack.extend(v for v in reversed(parts) if isinstance(v, (Expr, Stmt, tuple, list)))


def loop_reductions(body: tuple) -> tuple:
    """(local, op, dtype) of each `s = s + v`, `s = max(s, v)`, `s = min(s, v)` of a loop
    body (v not reading s) where nothing else it does depends on the order of the
    iterations: besides these it only declares locals of its own (no stores, checks,
    collectives or inner loops)."""
    out, own = [], set()
    for s in body:
        v = getattr(s, "value", None)
        this = Ref(s.name, v.dtype) if isinstance(s, Set) else None
        if isinstance(s, Decl):
            own.add(s.name)
        elif this is not None and s.name not in own and isinstance(v, Bin) and v.op == "+" \
                and this in (v.a, v.b):
            out.append((s.name, "+", v.dtype))
        elif this is not None and s.name not in own and isinstance(v, Math) and \
                v.fn in ("max", "min") and len(v.args) == 2 and this in v.args:
            out.append((s.name, v.fn, v.dtype))
        else:
            return ()
    nodes = list(walk(body))
    if any(isinstance(n, (Checked, InRange, CheckedDiv, Collective)) for n in nodes):
        return ()
    reads = [n.name for n in nodes if isinstance(n, Ref)]
    return tuple(out) if all(reads.count(r[0]) == 1 for r in out) else ()


def evaluate(e: Expr, env: dict):
    """A host expression's value (`env`: sizes and scalars by name)."""
    if isinstance(e, Lit):
        return e.value
    if isinstance(e, Ref):
        return env[e.name]
    if isinstance(e, Cast):
        v = evaluate(e.a, env)
        return float(v) if e.dtype in FLOAT_DTYPES else int(v)
    if isinstance(e, Bin):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        if e.op in ("/", "%") and e.dtype in INT_DTYPES:
            if not b:
                return 0
            q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)     # C: truncating
            return q if e.op == "/" else a - b * q
        return _HOST_OPS[e.op](a, b)
    if isinstance(e, Math) and e.fn in ("min", "max"):
        vals = [evaluate(a, env) for a in e.args]
        return min(vals) if e.fn == "min" else max(vals)
    if isinstance(e, Math) and e.fn == "ceildiv":
        a, b = (evaluate(x, env) for x in e.args)
        return -(-a // b)
    if isinstance(e, Select):       # a broadcast extent: the other where one is 1
        return evaluate(e.a if evaluate(e.cond, env) else e.b, env)
    raise TypeError(f"not a host expression: {e!r}")


_HOST_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
             "/": lambda a, b: a / b, "%": lambda a, b: math.fmod(a, b),
             "==": lambda a, b: a == b}


def ceildiv(a: Expr, b: int) -> Expr:
    return Math("ceildiv", (a, Lit(b, a.dtype)), a.dtype)
