"""The attention schedule: softmax(Q K^T * scale, masked) V in every form the recognition
pass finds (passes/recognise.py: three-pass, online statistics, one pass per element, tiled
flash with any block size and `min(...)` tiles; any key condition, any launch-constant
scale, any axis order of the tensors).

Three algorithms. The first, for every target, an online softmax per query:

* a block takes `block_q` queries of one (batch, head); `lanes` threads share a query, lane r
  scoring keys r, r + lanes, ... of every tile;
* the keys go by tiles of `block_kv`, their K and V rows staged in shared memory by the
  whole block (`tiles`; without, each thread reads them from memory: one thread per block,
  as on the CPU);
* a thread scores `chunk` keys into registers, then makes one online-softmax update
  (m' = max(m, s), l = l e^(m - m') + sum e^(s - m'), o = o e^(m - m') + sum e^(s - m') V);
* the lanes of a query merge their (m, l, o) through shared memory; the query stores o / l,
  and a query no key is admitted to stores 0 (or 0 / 0 where the body divides by the sum
  after its key loop, as the reference then does); where the loops' result turns on it
  (`_Kernel.tracks_first`), each thread also keeps its first admitted key and its first
  admitted key of a score above -inf, merged as the smallest of the lanes', which tell a
  row whose admitted scores are all -inf (NaN, exp(-inf - -inf)) from one with no key, and
  an online form's row whose first admitted score is -inf (NaN whatever keys follow).

The second (`products`, where head_dim is 16 to 64 in steps of 16 and the target has
half-warp collectives: CUDA) computes Q K^T and P V of 64 queries x 64 keys as register
tiles of 256 or 128 threads (`_Products`), the online softmax on those registers.

The third (`mma`, attention_mma.py: CUDA with mma.sync, f16 or bf16 Q, K and V, head_dim a
multiple of 16 up to 256, sizes baked in) is FlashAttention-2 on tensor cores, the default
where it applies.

The query row and the output row are held in registers. They and the K/V tiles are vectors
of four (`f32x4`: scores by `dot`, the output updated four lanes at once) where the target
computes with vectors and head_dim (or its class) is a multiple of four, scalars otherwise.
Where the sizes are baked in the kernel is written for the launch's head_dim; where they
are not (WebGPU: one program for every size set) there is one kernel per class of head_dim
(up to 32, 64, 128), each launched only when the launch's head_dim is in its class.

V (and the output) may have a head_dim other than Q's and K's (multi-head latent attention):
the first algorithm's query row and scores run over Q's, its output row and V's tile over
V's (a class kernel holds both rows at the class's length, launched where the larger is in
it); the products and the tensor-core kernels, cut for one head_dim, say they take one.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .. import cir, errflag
from ..launch import ir
from ..launch.scalar import (NotScalar, ScalarLowering, buffer_params, cast, host_expr,
                             index_dtype, lit, user_name)
from ..passes import recognise
from .base import Params, Schedule, kernel_name

F = "f32"
NEG = lit(float("-inf"), F)
ZERO = lit(0.0, F)
# one object, so that programs holding it compare equal (NaN is no NaN's equal, but a
# dataclass compares its fields as tuples do: the same object first)
NAN = lit(float("nan"), F)
HEAD_DIM_CLASSES = (32, 64, 128)
# the shared arrays are declared statically: CUDA takes at most 48 KiB of them
STATIC_SHARED = 48 * 1024
# the forms whose key loop updates a running maximum from -inf one key at a time
ONLINE_FORMS = ("online-stats", "one-pass")
FORMS = {"flash": "flash attention", "three-pass": "attention (three passes)",
         "online-stats": "attention (online statistics)", "one-pass": "attention (one pass)"}


@dataclass(frozen=True)
class AttentionParams(Params):
    block_q: int = 64           # queries per block
    block_kv: int = 64          # keys per tile
    lanes: int = 1              # threads per query
    chunk: int = 16             # keys a thread scores per online-softmax update
    tiles: bool = True          # K and V tiles in shared memory
    # Q K^T and P V as register-tiled products (64 x 64 tiles, 16 threads per query row; the
    # fields above are then unused): head_dim 16 to 64 in steps of 16
    products: bool = False
    # the products' variants: queries x keys a thread scores (4 x 4: 256 threads; 8 x 4 or
    # 4 x 8: 128 threads, each element read from shared memory feeding more FMAs; with 8 keys
    # a query row is 8 threads and a warp's reads of a tile meet fewer distinct rows), the
    # next tile's K/V read into registers during this one (else at the tile's start, other
    # blocks covering the wait), and exponentials as exp2 with log2(e) folded into Q's scale
    rows: int = 4
    cols: int = 4
    prefetch: bool = True
    exp2: bool = False
    # blocks a multiprocessor holds at once, as the register cap (0: as many as fit without
    # spills; more, where the few values spilled are read outside the tile's inner loops)
    occupancy: int = 0
    # Q K^T and P V on tensor cores (attention_mma.py: f16 or bf16 Q, K, V; `block_q` queries
    # over `warps` warps, `block_kv`-key tiles, Q's fragments held in registers for the whole
    # key loop or read from shared memory at each tile, `hold_q`, `occupancy` as above; the
    # other fields above are then unused)
    mma: bool = False
    warps: int = 4
    hold_q: bool = True
    # the tensor-core kernel's variants (`block_kv` keys a tile there: 64 or 128): K/V tiles in
    # a ring of `stages` shared buffers (3: one barrier a tile, the copy two tiles ahead), P and
    # the output converted by pairs (`packed`: one 32-bit store a pair), the scale applied in the
    # exponent's FMA instead of to each score (`fold_scale`), O's rescale skipped where no row
    # of the warp found a larger maximum (`skip_rescale`), exp2 by ex2.approx.ftz and the
    # running maxima by max.f32 (`fast_math`)
    stages: int = 2
    packed: bool = False
    fold_scale: bool = False
    skip_rescale: bool = False
    fast_math: bool = False
    # the products on Hopper's warpgroup MMAs (attention_wgmma.py: 64 queries a warpgroup, Q,
    # K and V in 128-byte swizzled tiles, P from registers; `hold_q` then False)
    wgmma: bool = False
    # two warpgroups taking turns at the tensor cores (FlashAttention-3's ping-pong): one's
    # softmax while the other's products run
    pingpong: bool = False
    # K and V (and Q) brought by the copy engine (TMA) into the swizzled tiles, asked for by
    # a producer warpgroup of its own through mbarriers (attention_wgmma.py): `warps` are
    # then the consumers' warps, which meet no block barrier
    tma: bool = False

    def describe(self) -> str:
        """The fields, the products' variants only where they are not the defaults (so the
        kernels described before they existed read as they did)."""
        out = super().describe()
        extra = [f"{f}={getattr(self, f)}" for f, d in (("rows", 4), ("cols", 4), ("prefetch", True),
                                                         ("exp2", False), ("occupancy", 0), ("mma", False),
                                                         ("warps", 4), ("hold_q", True), ("stages", 2),
                                                         ("packed", False), ("fold_scale", False),
                                                         ("skip_rescale", False), ("fast_math", False),
                                                         ("wgmma", False), ("pingpong", False),
                                                         ("tma", False))
                 if getattr(self, f) != d]
        return out.split(", rows=")[0] + "".join(", " + e for e in extra)


@dataclass(frozen=True)
class Shape:
    """What the schedule needs of a recognised attention at one binding of the sizes."""
    p: object                   # recognise.Attention or FlashAttention
    bufs: dict                  # role (q, k, v, out) -> cir buffer
    axes: dict                  # role -> axes of (batch, head, sequence)
    head_dim: object            # the last axis of Q and K (a number or a size name)
    D: int                      # its value at these sizes
    head_dim_v: object = None   # the last axis of V and out (multi-head latent attention's
    Dv: int = 0                 # differs from Q's and K's), its value; None, 0: head_dim's

    def __post_init__(self):
        if self.head_dim_v is None:
            object.__setattr__(self, "head_dim_v", self.head_dim)
            object.__setattr__(self, "Dv", self.D)

    @property
    def one_width(self) -> bool:
        return self.D == self.Dv


def match(kernel: cir.Kernel, target, sizes: dict):
    """(Shape, None) for an attention this schedule runs on `target`, else (None, why not)."""
    if kernel.kernel_type.kind not in ("attention", "flash_attention"):
        return None, "not an attention kernel"
    p = recognise.attention(kernel)
    if not p:
        return None, p.note(kernel.kernel_type.kind)
    named = {b.name: b for b in list(kernel.inputs) + [kernel.output]}
    bufs = {"q": named[p.q], "k": named[p.k], "v": named[p.v], "out": named[p.out]}
    for b in bufs.values():
        if b.dtype not in ("f32", "f16", "bf16") or not target.has(b.dtype):
            return None, f"`{b.name}` is {b.dtype}: the schedule computes in f32 over f32, f16 or bf16"
    try:
        B, H, S, SK = (int(recognise.launch_value(e, sizes))
                       for e in (p.n_batch, p.n_heads, p.n_queries, p.n_keys))
        hd = getattr(p, "head_dim", None)
        hd = None if hd is None else int(recognise.launch_value(hd, sizes))
        group = 1 if p.kv_group is None else int(recognise.launch_value(p.kv_group, sizes))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None, "a loop range that is not a size known at launch"
    if group < 1:
        return None, f"K and V of head h / {group}"
    axes = {"q": p.q_axes, "k": p.k_axes, "v": p.v_axes, "out": p.out_axes}
    kv_heads = (H - 1) // group + 1 if H else 0     # grouped-query heads: those h / group reaches
    want = {"q": (B, H, S), "k": (B, kv_heads, SK), "v": (B, kv_heads, SK), "out": (B, H, S)}
    # Q and K share one head_dim, V and out another (the loop over it, where there is one)
    D, Dv = ({cir.eval_dim(bufs[r].shape[-1], sizes) for r in roles} for roles in (("q", "k"), ("v", "out")))
    if len(D) != 1:
        return None, "Q and K differ in head_dim"
    if len(Dv) != 1 or (hd is not None and hd not in Dv):
        return None, "V and out differ in head_dim (or the loop over it does not cover it)"
    for role, b in bufs.items():
        # an axis the tensors lack (3-D or 2-D) is one of size 1
        got = tuple(1 if a is None else cir.eval_dim(b.shape[a], sizes) for a in axes[role])
        # K and V may hold more heads than the groups read (the rows are found by their own shape)
        if got != want[role] and not (role in ("k", "v") and got[0::2] == want[role][0::2]
                                      and got[1] >= want[role][1]):
            return None, (f"`{b.name}` is not [{', '.join(map(str, want[role]))}] in the axes the "
                          "loops index")
    return Shape(p, bufs, axes, bufs["q"].shape[-1], D.pop(), bufs["out"].shape[-1], Dv.pop()), None


def baked(target, shape: Shape) -> bool:
    """Whether the kernel is written for the launch's head_dims (else one per class)."""
    return not target.symbolic_sizes or all(isinstance(d, int) for d in (shape.head_dim, shape.head_dim_v))


def shared_bytes(bq: int, bk: int, dcap: int, params: AttentionParams, vcap: int | None = None) -> int:
    """The shared memory of a kernel: the K and V tiles (rows of `dcap` and `vcap`, padded,
    `row_pad`), which the lanes' merge reuses for the output rows, the lanes' (m, l) and
    their first keys (two indices of up to 8 bytes, `_Kernel.tracks_first`)."""
    if not params.tiles:
        return 0
    vcap = dcap if vcap is None else vcap
    pad = row_pad(params)
    merge = bq * vcap if params.lanes > 1 else 0
    stats = 2 * bq * params.lanes if params.lanes > 1 else 0
    return 4 * (max(bk * (dcap + pad) + bk * (vcap + pad), merge) + stats) + 4 * stats


def row_pad(params: AttentionParams) -> int:
    """Elements after each row of a shared tile: where the lanes of a query read different
    rows, four, so that they meet different banks and rows stay 16-byte aligned."""
    return 4 if params.lanes > 1 else 0


def fit(params: AttentionParams, dcap: int, target, vcap: int | None = None):
    """(block_q, block_kv, chunk) for head_dims up to `dcap` (Q, K) and `vcap` (V, by
    default `dcap`) within the shared memory: the key tile halves first, then the query
    block; None where nothing fits."""
    bq, bk, R = params.block_q, params.block_kv, params.lanes
    limit = min(target.shared_bytes, STATIC_SHARED)
    while shared_bytes(bq, bk, dcap, params, vcap) > limit:
        if bk > max(R, 8):
            bk //= 2
        elif bq > 8:
            bq //= 2
        else:
            return None
    return bq, bk, min(params.chunk, bk // R)


_PRODUCTS_4X4 = AttentionParams(64, 64, 16, 4, True, True)
# the default: 8 x 4 scores a thread (128 threads), the K/V tile read at its start, exp2 with
# log2(e) in Q's scale. H100, BERT-base f32 (bench/bench_attention_products.py): 0.823 ms,
# against 1.019 for 4 x 4 scores with the next tile prefetched into registers
PRODUCTS = replace(_PRODUCTS_4X4, rows=8, prefetch=False, exp2=True)
# the products' other variants, the tuner's next candidates: 128 threads without the
# prefetch registers (three blocks a multiprocessor), then 256 threads, then 128 threads with
# them (two blocks)
PRODUCT_VARIANTS = tuple(replace(_PRODUCTS_4X4, rows=r, cols=c, prefetch=f, exp2=e)
                         for f, shapes in ((False, ((8, 4), (4, 8), (4, 4))), (True, ((4, 4), (4, 8), (8, 4))))
                         for r, c in shapes for e in (True, False)
                         if (r, c, f, e) != (8, 4, False, True)) + tuple(
    # one block more a multiprocessor (24 or 16 warps), at the price of 8 or 44 bytes spilled
    # (nvcc sm_90, head_dim 64: addresses, read once a tile at most); 8 x 4 would spill 880
    replace(_PRODUCTS_4X4, rows=r, cols=c, prefetch=False, exp2=True, occupancy=n)
    for r, c, n in ((4, 4, 3), (4, 8, 4)))
LOG2E = 1.4426950408889634


def products_why_not(target, shape: Shape, params: AttentionParams = PRODUCTS) -> str | None:
    """None where the register-tiled products of `params` run this attention on `target`:
    one head_dim of 16..64 in steps of 16 known when compiled, collectives over the 64 / cols
    lanes that share a query row, 256 threads, the Q, K (then P) and V tiles in shared
    memory; else the reason."""
    D = shape.D
    if not shape.one_width:
        # their shared tiles and output columns a thread are cut for one head_dim
        return f"V's head_dim {shape.Dv} is not Q's and K's {D}: the register-tiled products take one"
    if not baked(target, shape) or target.symbolic_sizes:
        return "the register-tiled products are written for sizes known when compiled"
    if D % 16 or not 16 <= D <= 64:
        return f"head_dim {D}: the register-tiled products take 16 to 64 in steps of 16"
    if lane_collectives(target) < 64 // params.cols or target.max_threads < 256:
        return f"the {target.name} target has no collectives over {64 // params.cols} lanes or 256 threads a block"
    if 4 * (D * 64 + max(D * 64, 64 * 64) + 64 * D) > min(target.shared_bytes, STATIC_SHARED):
        return f"head_dim {D}: the Q, K and V tiles outgrow the shared memory"
    return None


def products_fit(target, shape: Shape, params: AttentionParams = PRODUCTS) -> bool:
    """Whether the register-tiled products of `params` run this attention on `target`."""
    return products_why_not(target, shape, params) is None


def fitting_products(target, shape: Shape) -> list:
    """The products' parameter choices (the default first) that run this attention on
    `target`."""
    return [c for c in (PRODUCTS,) + PRODUCT_VARIANTS if products_fit(target, shape, c)]


def lane_collectives(target) -> int:
    """The widest group of consecutive lanes a collective may span on `target` (1: none)."""
    return max(target.warp if target.collectives else 1, target.lane_groups)


def _widths(shape: Shape) -> str:
    """Q's and K's head_dim, and V's where it differs."""
    return str(shape.D) if shape.one_width else f"{shape.D} (V's {shape.Dv})"


def _is_lit(e, value) -> bool:
    return isinstance(e, ir.Lit) and e.value == value


def _pow2(n: int) -> bool:
    return n > 0 and not n & (n - 1)


def _alive(x) -> ir.Expr:
    """`!(x <= -inf)` rather than `x > -inf`: a NaN score goes on into the sums, as the
    reference's softmax takes it."""
    return ir.Un("not", ir.Bin("<=", x, NEG, "bool"), "bool")


class Attention(Schedule):
    name = "attention"
    kinds = ("flash_attention",)

    def why_not(self, kernel, target, sizes):
        shape, why = match(kernel, target, sizes)
        if shape is None:
            return why
        if 0 in (shape.D, shape.Dv):
            return "head_dim 0: no products to tile (the loops run as written)"
        if not self.space(kernel, target, sizes):
            return f"head_dim {_widths(shape)}: no tiles fit the target's shared memory"
        return None

    def default(self, kernel, target, sizes):
        """The CPU: one query per block, keys read from memory. WebGPU: 4 threads per query.
        A GPU with 16-byte vector loads (CUDA): the register-tiled products where head_dim
        allows. Otherwise (Metal) a thread per query, 64 queries and 64-key tiles."""
        space = self.space(kernel, target, sizes)
        return space[0] if space else self._first(target)

    def wants_launch_sizes(self, kernel, target, sizes):
        shape, _ = match(kernel, target, sizes)
        return shape is not None and bool(fitting_products(target, shape))

    @staticmethod
    def _first(target, head_dim: int = 0) -> AttentionParams:
        if target.max_threads == 1:
            return AttentionParams(1, 16, 1, 16, False)
        # WebGPU (its program of every size set, and one built for a launch past its largest
        # head_dim class): 16-key tiles; at head_dim 64 on an H100 through Vulkan, 0.240 ms
        # against 0.262 for 32-key tiles. Past head_dim 128 anywhere, four lanes share a
        # query: one thread holding both rows of 129 values took NVRTC 40 s (H200)
        if target.symbolic_sizes or target.name == "webgpu" or head_dim > HEAD_DIM_CLASSES[-1]:
            return AttentionParams(32, 16, 4, 4)
        return AttentionParams(64, 64, 1, 16)

    def space(self, kernel, target, sizes):
        shape, _ = match(kernel, target, sizes)
        if shape is None:
            return []
        first = self._first(target, max(shape.D, shape.Dv))
        if not first.tiles:
            return [first, replace(first, chunk=8), replace(first, chunk=32, block_kv=32)]
        from . import attention_mma     # (it builds on this module's kernel)
        head = [first]
        mma = attention_mma.choices(target, shape, sizes)
        products = fitting_products(target, shape)
        if products:     # first where 16-byte vector loads feed them, or where lane groups
            # stand in for warps (WebGPU: BERT-base f32 on an H200's Vulkan, 0.143 ms against
            # 0.224 for 4 threads a query)
            head = products[:1] + [first] + products[1:] if target.vector_bytes >= 16 or \
                target.lane_groups else [first] + products
        choices = mma + head + [AttentionParams(bq, bk, r, ch) for bq in (32, 64, 128)
                          for bk in (32, 64) for r in (1, 2, 4) for ch in (8, 16) if ch * r <= bk]
        out = []
        for c in choices:
            if c in out:
                continue
            if c.products or c.mma:
                out.append(c)
                continue
            if c.block_q * c.lanes > target.max_threads:
                continue
            if not all(_pow2(x) for x in (c.block_q, c.block_kv, c.lanes, c.chunk)):
                continue
            if all(fit(c, d, target, v) is not None for d, v in self.head_dims(target, shape)):
                out.append(c)
        return out

    @staticmethod
    def head_dims(target, shape: Shape) -> tuple:
        """(Q's and K's head_dim, V's) of each kernel: the launch's where baked, else one
        class a kernel, both rows that long (launched where the larger is in the class)."""
        if baked(target, shape):
            return ((shape.D, shape.Dv),)
        return tuple((c, c) for c in HEAD_DIM_CLASSES)

    def build(self, kernel, target, sizes, params: AttentionParams) -> ir.Program:
        # `match` found the output [B, H, S, D] in the axes the loops index, and every kernel
        # stores each query row's head_dim values (0 or NaN for a row no key is admitted to)
        # and every Q, K and V element is read at row_offset + its head_dim index, so a view
        # whose head_dim axis is contiguous is read where it lies (Buffer.strides)
        shape, _ = match(kernel, target, {k: int(v) for k, v in sizes.items()})
        return replace(self._build(kernel, target, sizes, params, errflag.ErrorSites()),
                       covers_output=True,
                       strided_ok=tuple(shape.bufs[r].name for r in ("q", "k", "v")))

    def _build(self, kernel, target, sizes, params: AttentionParams, sites) -> ir.Program:
        sizes = {k: int(v) for k, v in sizes.items()}
        shape, why = match(kernel, target, sizes)
        if shape is None:
            raise NotScalar(why)
        sym = target.symbolic_sizes
        idx = "i32" if sym else index_dtype(kernel, sizes)
        if params.mma:
            return self._mma(kernel, target, sizes, shape, params, sites, idx)
        if params.products:
            why = products_why_not(target, shape, params)
            if why:
                raise NotScalar(why)
            return self._products(kernel, target, sizes, shape, params, sites, idx)
        dcaps = self.head_dims(target, shape)
        fits = {d: fit(params, d[0], target, d[1]) for d in dcaps}
        if any(f is None for f in fits.values()):
            raise NotScalar(f"{params.describe()} does not fit the shared memory")
        # every class kernel declares the same shared arrays (one module holds them all)
        pad = row_pad(params)
        kv = max(max(f[1] * (d + pad) + f[1] * (v + pad), f[0] * v if params.lanes > 1 else 0)
                 for (d, v), f in fits.items())
        ml = max(2 * f[0] * params.lanes for f in fits.values())
        built, lines = [], []
        for n, (dcap, vcap) in enumerate(dcaps):
            bq, bk, chunk = fits[dcap, vcap]
            lo = dcaps[n - 1][0] if n else 0
            built.append(_Kernel(kernel, target, sizes, shape, params, sites, idx, dcap, lo, bq, bk,
                                 chunk, kv, ml, None if len(dcaps) == 1 else f"d{dcap}", vcap).kernel())
            width = dcap if dcap == vcap else f"{dcap}, V's {vcap}"
            lines.append(f"head_dim {'up to ' + str(width) if len(dcaps) > 1 else width}: "
                         f"{bq} queries x {bk}-key tiles, {chunk} keys per step")
        return self._program(kernel, shape, params, sites, built, lines, target, sizes)

    def _products(self, kernel, target, sizes, shape, params, sites, idx) -> ir.Program:
        """The register-tiled products; with 16-byte loads of K and V (f32 on a target that
        has them), also their `fallback` for buffers whose base is not 16-byte aligned."""
        def build(vector, suffix):
            b = _Products(kernel, target, sizes, shape, params, sites, idx, shape.D, 0, 64, 64,
                          16, 0, 0, suffix)
            b.vector = vector
            b.vector_q = vector and q_f32
            return self._program(kernel, shape, params, sites, [b.kernel()],
                                 [f"head_dim {shape.D}: 64 queries x 64-key tiles"
                                  + (f", 16-byte {'Q/K/V' if b.vector_q else 'K/V'} loads" if vector else "")],
                                 target, sizes)
        kv = (shape.bufs["k"], shape.bufs["v"])
        q_f32 = shape.bufs["q"].dtype == F
        if target.vector_bytes < 16 or any(b.dtype != F for b in kv):
            return build(False, None)
        prog = build(True, None)
        prog.fallback = build(False, "w1")
        prog.aligned = tuple(sorted({user_name(b.name) for b in kv + ((shape.bufs["q"],) if q_f32 else ())}))
        prog.sites = prog.fallback.sites = sites.as_tuple()
        return prog

    def _mma(self, kernel, target, sizes, shape, params, sites, idx) -> ir.Program:
        """The tensor-core kernel; Q, K and V are copied 16 bytes at a time, so buffers not
        so aligned run the `fallback`: the first choice without tensor cores."""
        from . import attention_mma
        *built, maps = attention_mma.kernel(kernel, target, sizes, shape, params, sites, idx)
        prog = self._program(kernel, shape, params, sites, [tuple(built)],
                             [f"head_dim {shape.D}: {params.block_q} queries x {params.block_kv}-key tiles"], target, sizes)
        plain = next(p for p in self.space(kernel, target, sizes) if not p.mma)
        prog.fallback = self._build(kernel, target, sizes, plain, sites)
        prog.aligned = tuple(sorted({user_name(shape.bufs[r].name) for r in attention_mma.aligned(params)}))
        prog.sites = prog.fallback.sites = sites.as_tuple()
        prog.arch_specific = params.wgmma       # sm_90a's own instructions
        prog.tensor_maps = maps
        return prog

    @staticmethod
    def _program(kernel, shape, params, sites, built, lines, target, sizes) -> ir.Program:
        """The program of the kernels `built` ((kernel, grid) each), described."""
        launches = []
        for k, grid in built:
            if not target.symbolic_sizes:
                grid = lit(max(0, ir.evaluate(grid, {user_name(s): v for s, v in sizes.items()})), "i64")
            elif not host_expr(grid):
                raise NotScalar("a loop range the host cannot compute")
            launches.append(ir.Launch(k.name, grid, k.block))
        p = shape.p
        if params.mma:
            from . import attention_mma
            how = attention_mma.describe(params, shape)
        elif params.products:
            R, C = params.rows, params.cols
            how = (f"Q K^T and P V as register-tiled products ({R} x {C} and {R} x head_dim/{64 // C} "
                   f"per thread), online softmax with {64 // C}-lane collectives, K/V tiles in shared "
                   "memory" + (", the next tile prefetched" if params.prefetch else "")
                   + (", exp2 with log2(e) in the scale" if params.exp2 else ""))
        else:
            how = (f"{params.lanes} threads per query, " if params.lanes > 1 else "one thread per query, ")
            how = (how
                   + ("K/V tiles in shared memory, " if params.tiles else "K/V read from memory, ")
                   + "online softmax in registers"
                   + (", the lanes merged in shared memory" if params.lanes > 1 else ""))
        what = (f"{'masked ' if p.mask is not None else ''}{FORMS[p.form]}: {how} "
                f"({'; '.join(lines)})")
        return ir.Program(kernel.name, tuple(k for k, _ in built), tuple(launches), (),
                          sites.as_tuple(), f"{what} (attention: {params.describe()})")


class _Kernel:
    """The launch IR of one kernel of the schedule (Q's and K's head_dim up to `dcap`, V's
    up to `vcap`, by default `dcap`)."""

    full = False                # the keys fill whole tiles (a subclass that bakes sizes in)

    def __init__(self, kernel, target, sizes, shape: Shape, params, sites, idx, dcap, lo,
                 bq, bk, chunk, kv_count, ml_count, suffix, vcap=None):
        self.k, self.shape, self.P = kernel, shape, params
        self.idx, self.dcap, self.lo = idx, dcap, lo
        self.vcap = dcap if vcap is None else vcap
        self.bq, self.bk, self.chunk = bq, bk, chunk
        self.kv_count, self.ml_count, self.suffix = kv_count, ml_count, suffix
        self.low = ScalarLowering(kernel, sizes, sites, idx, symbolic=target.symbolic_sizes,
                                   target=target)
        self.low.line = kernel.first_line
        self.sites = sites
        self.exact = baked(target, shape)
        self.stride = dcap + row_pad(params)        # of a row of a shared tile
        # the rows (q, o, the K/V tiles) are held as slots of W lanes: vectors of four where
        # the target computes with them and both head_dims (classes) are multiples of four
        self.W = 4 if target.vector_lanes >= 4 and dcap % 4 == 0 and self.vcap % 4 == 0 else 1
        self.C = dcap // self.W                     # slots of a row of Q or K
        self.Cv = self.vcap // self.W               # of V or out
        self.FV = ir.vector_dtype(F, self.W)
        self.sstride = self.stride // self.W        # slots of a row of a shared tile (K)
        self.vstride = (self.vcap + row_pad(params)) // self.W      # (V)

    # ---- small expression helpers -----------------------------------------------------

    def i(self, v):
        return lit(v, self.idx)

    def ref(self, name):
        return ir.Ref(name, self.idx)

    def add(self, *xs):
        """The sum of index or float terms, zeros left out."""
        xs = [x for x in xs if not _is_lit(x, 0)] or [xs[0]]
        out = xs[0]
        for x in xs[1:]:
            out = ir.Bin("+", out, x, out.dtype)
        return out

    def mul(self, a, b):
        if _is_lit(a, 0) or _is_lit(b, 1):
            return a
        if _is_lit(b, 0) or _is_lit(a, 1):
            return b
        return ir.Bin("*", a, b, a.dtype)

    def at(self, axis):
        e = ir.Thread(axis)
        return e if self.idx == "i32" else ir.Cast(e, self.idx)

    def size(self, e):
        """A launch-constant CIR expression (a loop range) as an index value."""
        return self.low.index(e)

    def row_offset(self, role: str, b, h, s) -> ir.Expr:
        """The flat offset of row (b, h, s) of the tensor of `role` (head_dim is its last axis);
        K's and V's rows of grouped-query heads are those of head h / kv_group."""
        buf = self.shape.bufs[role]
        group = self.shape.p.kv_group
        if role in ("k", "v") and group is not None:
            h = ir.Bin("/", h, self.low.index(group), self.idx)
        terms = []
        for var, axis in zip((b, h, s), self.shape.axes[role]):
            if axis is None:            # no such axis: its index is 0
                continue
            st = [self.i(buf.strides[axis])] if buf.strides is not None else \
                [self.low.size(d) for d in buf.shape[axis + 1:] if not (isinstance(d, int) and d == 1)]
            t = var
            for x in st:
                t = self.mul(t, x)
            terms.append(t)
        return self.add(*terms)

    def element(self, role: str, row, col, inside: bool = False) -> ir.Expr:
        """Element `col` of a row of the tensor of `role` in f32: 0 past head_dim (the
        index kept in range) where the kernel is written for a class of head_dims and `col`
        is not known to be `inside` head_dim."""
        buf = self.shape.bufs[role]
        if self.exact or inside:
            return cast(ir.Load(user_name(buf.name), self.add(row, col), buf.dtype), F)
        D = self.width(role)
        c = ir.Math("min", (col, ir.Bin("-", D, self.i(1), self.idx)), self.idx)
        v = cast(ir.Load(user_name(buf.name), self.add(row, c), buf.dtype), F)
        return ir.Select(ir.Bin("<", col, D, "bool"), v, ZERO, F)

    def width(self, role: str) -> ir.Expr:
        """The head_dim of the tensor of `role` (Q's and K's, or V's and out's)."""
        return self.D if role in ("q", "k") else self.Dv

    def slots(self, role: str) -> int:
        """Slots of a row of the tensor of `role`."""
        return self.C if role in ("q", "k") else self.Cv

    def each_slot(self, var: str, body_of, start: int = 0, role: str = "q") -> list:
        """for var in start..slots of a row of `role`, unrolled (the rows are registers) up
        to the largest head_dim class; a longer row is an array the loop indexes (llvmpipe
        took 7 s to compile head_dim 256 written out, minutes at 512)."""
        short = self.slots(role) * self.W <= HEAD_DIM_CLASSES[-1]
        return self.unrolled(ir.For(var, self.i(start), self.i(self.slots(role)), self.i(1),
                                    tuple(body_of(self.ref(var))), self.idx, unroll=short))

    # ---- slots: W lanes of a row (a vector, or one element where W is 1) ---------------

    def vec(self, x) -> ir.Expr:
        """Scalar `x` in every lane of a slot."""
        return x if self.W == 1 else ir.Vector((x,), self.FV)

    def slot_of(self, lane_of) -> ir.Expr:
        """The slot whose lane w is lane_of(w)."""
        if self.W == 1:
            return lane_of(0)
        return ir.Vector(tuple(lane_of(w) for w in range(self.W)), self.FV)

    def lane(self, slot, w) -> ir.Expr:
        return slot if self.W == 1 else ir.Lane(slot, w, F)

    def col(self, c, w) -> ir.Expr:
        """The column of lane w of slot c."""
        return self.add(self.mul(c, self.i(self.W)), self.i(w))

    def dot(self, a, b) -> ir.Expr:
        """The sum of the lane-by-lane products of two slots."""
        return self.mul(a, b) if self.W == 1 else ir.Math("dot", (a, b), F)

    def reg(self, name, c) -> ir.Load:
        return ir.Load(name, c, self.FV)

    def unrolled(self, loop: ir.For) -> list:
        """A loop over registers (the printer writes it out where the language has no unroll
        hint, so that every index of a register array is a constant)."""
        return [loop]

    # ---- the kernel -------------------------------------------------------------------

    def kernel(self):
        p, P, low = self.shape.p, self.P, self.low
        R, bq = P.lanes, self.bq
        T = bq * R
        idx = self.idx
        self.D = self.low.size(self.shape.head_dim)
        self.Dv = self.low.size(self.shape.head_dim_v)
        # the kernel of a class runs where the larger head_dim is in it
        Dm = self.D if self.shape.head_dim == self.shape.head_dim_v else ir.Math("max", (self.D, self.Dv), idx)
        B, H, S, SK = (self.size(e) for e in (p.n_batch, p.n_heads, p.n_queries, p.n_keys))
        nqb = ir.Bin("/", self.add(S, self.i(bq - 1)), self.i(bq), idx)
        body = [ir.Decl("_S", idx, S), ir.Decl("_SK", idx, SK),
                ir.Decl("_nqb", idx, nqb), ir.Decl("_bh", idx, ir.Bin("/", self.at("block"), self.ref("_nqb"), idx)),
                ir.Decl("_h", idx, ir.Bin("%", self.ref("_bh"), H, idx)),
                ir.Decl("_b", idx, ir.Bin("/", self.ref("_bh"), H, idx)),
                ir.Decl("_t", idx, self.at("thread")),
                ir.Decl("_q", idx, ir.Bin("/", self.ref("_t"), self.i(R), idx) if R > 1 else self.ref("_t")),
                *([ir.Decl("_r", idx, ir.Bin("%", self.ref("_t"), self.i(R), idx))] if R > 1 else []),
                ir.Decl("_qi", idx, self.add(self.mul(ir.Bin("%", self.at("block"), self.ref("_nqb"), idx),
                                                      self.i(bq)), self.ref("_q"))),
                # a thread past the last query computes the last one and stores nothing
                ir.Decl("_qc", idx, ir.Math("min", (self.ref("_qi"), ir.Bin("-", self.ref("_S"), self.i(1), idx)), idx))]
        S, SK = self.ref("_S"), self.ref("_SK")
        bh = (self.ref("_b"), self.ref("_h"))
        body += [ir.Decl("_qrow", idx, self.row_offset("q", *bh, self.ref("_qc"))),
                 ir.Decl("_kbase", idx, self.row_offset("k", *bh, self.i(0))),
                 ir.Decl("_vbase", idx, self.row_offset("v", *bh, self.i(0))),
                 ir.Decl("_orow", idx, self.row_offset("out", *bh, self.ref("_qc"))),
                 ir.Decl("_scale", F, low.operand(p.scale, F)),
                 ir.Array("_qr", self.FV, self.C), ir.Array("_o", self.FV, self.Cv),
                 *self.each_slot("_d", lambda c: [
                     ir.Store("_qr", c, self.mul(self.slot_of(lambda w: self.element(
                         "q", self.ref("_qrow"), self.col(c, w))), self.vec(ir.Ref("_scale", F))))]
                     + ([ir.Store("_o", c, self.vec(ZERO))] if self.Cv == self.C else [])),
                 *([] if self.Cv == self.C else self.each_slot("_d", lambda c: [
                     ir.Store("_o", c, self.vec(ZERO))], role="v")),
                 ir.Decl("_m", F, NEG, True), ir.Decl("_l", F, ZERO, True)]
        if self.tracks_first:       # no key yet: both at the key count
            body += [ir.Decl("_fa", idx, SK, True), ir.Decl("_fn", idx, SK, True)]
        if P.tiles:
            body.append(ir.Array("_kv", self.FV, self.kv_count // self.W, "shared"))
        steps = ir.For("_j0", self.i(0), self.i(self.bk), self.i(self.chunk * R),
                       tuple(self.step()), idx)
        tile = ([ir.Barrier(), *self.fill(), ir.Barrier()] if P.tiles else []) + [steps]
        body.append(ir.For("_k0", self.i(0), SK, self.i(self.bk), tuple(tile), idx))
        body += self.merge() if R > 1 else [ir.Decl("_L", F, ir.Ref("_l", F))]
        body += self.store()
        if not self.exact and self.dcap == HEAD_DIM_CLASSES[-1]:
            # a head_dim past the largest class: the row the registers hold is too short (the
            # site named by the size, which a launch past it is built for: wgsl.past_limits)
            for dim, D in {self.shape.head_dim: self.D, self.shape.head_dim_v: self.Dv}.items():
                site = self.sites.add(errflag.LIMIT, self.k.first_line,
                                      dim if isinstance(dim, str) else "head_dim", self.dcap)
                body = [ir.If(ir.InRange(ir.Bin("-", D, self.i(1), idx), self.i(self.dcap), site),
                              tuple(body))]
        name = kernel_name(self.k, self.suffix or "")
        width = self.dcap if self.dcap == self.vcap else f"{self.dcap}, V's {self.vcap}"
        k = ir.Kernel(name, buffer_params(self.k, self.low.sizes, idx), tuple(body), T, idx,
                      f"attention, head_dim {'up to ' if not self.exact else ''}{width}: "
                      f"{bq} queries per block, {R} thread{'s' if R > 1 else ''} each")
        blocks = ir.Bin("*", ir.Bin("*", B, H, idx), ir.ceildiv(self.size(p.n_queries), bq), idx)
        if not self.exact:          # launched only for the head_dims of its class
            one = self.i(1)
            clip = lambda e: ir.Math("min", (ir.Math("max", (e, self.i(0)), idx), one), idx)
            blocks = self.mul(self.mul(blocks, clip(ir.Bin("-", Dm, self.i(self.lo), idx))),
                              clip(ir.Bin("-", self.i(self.dcap + 1), Dm, idx))
                              if self.dcap != HEAD_DIM_CLASSES[-1] else one)
        return k, blocks

    def fill(self) -> list:
        """K and V rows _k0 .. _k0 + block_kv into the shared tile (0 past the keys), a slot
        at a time: thread t takes slots t, t + T, ... of the tile in one flat loop (on an H100
        through Vulkan 4.5% faster at head_dim 64 than a loop over rows and one over a row's
        slots, each started at the thread's own row and slot); one loop for K and one for V
        where their rows differ in length."""
        idx, T = self.idx, self.bq * self.P.lanes
        row, col = self.ref("_row"), self.ref("_col")
        j = self.add(self.ref("_k0"), row)
        jc = ir.Math("min", (j, ir.Bin("-", self.ref("_SK"), self.i(1), idx)), idx)
        ok = ir.Bin("<", j, self.ref("_SK"), "bool")

        def store(role, inside):
            base = self.add(self.ref(f"_{role}base"), self.mul(self.ref("_jf"), self.seq_stride(role)))
            at = self.add(self.tile_at(role), self.mul(row, self.i(self.row_slots(role))), col)
            return ir.Store("_kv", at, ir.Select(
                ok, self.slot_of(lambda w: self.element(role, base, self.col(col, w), inside)),
                self.vec(ZERO), self.FV))

        def loop(roles):
            dc = self.slots(roles[0])
            stores = (ir.Decl("_jf", idx, jc),) + tuple(store(r, False) for r in roles)
            if not self.exact and self.W > 1:
                # a slot wholly inside head_dim (every slot where head_dim is a multiple of
                # the lanes) is read without a test and a clamp per element; one test for K
                # and V where they share the head_dim's size
                dims = {self.shape.head_dim if r == "k" else self.shape.head_dim_v for r in roles}
                stores = stores[:1] + tuple(
                    ir.If(ir.Bin("<", self.col(col, self.W - 1), self.width(g[0]), "bool"),
                          tuple(store(r, True) for r in g), tuple(store(r, False) for r in g))
                    for g in ([roles] if len(dims) == 1 else [(r,) for r in roles]))
            body = (ir.Decl("_row", idx, ir.Bin("/", self.ref("_e"), self.i(dc), idx)),
                    ir.Decl("_col", idx, ir.Bin("%", self.ref("_e"), self.i(dc), idx))) + stores
            return ir.For("_e", self.ref("_t"), self.i(self.bk * dc), self.i(T), body, idx)
        if self.C == self.Cv and self.sstride == self.vstride:
            return [loop(("k", "v"))]
        return [loop(("k",)), loop(("v",))]

    def tile_at(self, role: str) -> ir.Expr:
        """The first slot of the shared tile of `role` (V's after K's)."""
        return self.i(0 if role == "k" else self.bk * self.sstride)

    def row_slots(self, role: str) -> int:
        """Slots from one row of a shared tile of `role` to the next."""
        return self.sstride if role == "k" else self.vstride

    def seq_stride(self, role: str) -> ir.Expr:
        """From one key (or query) row of `role` to the next."""
        return self.row_offset(role, self.i(0), self.i(0), self.i(1))

    def key_value(self, role: str, c) -> ir.Expr:
        """Slot c of the current key's row of K or V (`_jj` in the tile, `_jc` overall)."""
        if self.P.tiles:
            if role == "v":     # the V tile after the K tile: one constant with the slot's
                c = self.add(c, self.tile_at("v"))
            return ir.Load("_kv", self.add(self.mul(self.ref("_jj"), self.i(self.row_slots(role))), c), self.FV)
        base = self.add(self.ref("_kbase" if role == "k" else "_vbase"),
                        self.mul(self.ref("_jc"), self.seq_stride(role)))
        return self.slot_of(lambda w: self.element(role, base, self.col(c, w)))

    def key_index(self) -> list:
        """_jj (in the tile), _j (overall) and _jc (kept in range) of key _u of this step."""
        idx, R = self.idx, self.P.lanes
        jj = self.add(self.ref("_j0"), self.mul(self.ref("_u"), self.i(R)), self.ref("_r")) \
            if R > 1 else self.add(self.ref("_j0"), self.ref("_u"))
        j = self.add(self.ref("_k0"), self.ref("_jj"))
        return [ir.Decl("_jj", idx, jj), ir.Decl("_j", idx, j),
                ir.Decl("_jc", idx, ir.Math("min", (self.ref("_j"), ir.Bin("-", self.ref("_SK"), self.i(1), idx)), idx))]

    def admitted(self) -> ir.Expr | None:
        """Whether key _j is one of this query's: in range, and the key condition (None:
        every key is; the bound is left out where the sizes are baked in and the keys fill
        whole tiles, `full`)."""
        ok = None if self.full else ir.Bin("<", self.ref("_j"), self.ref("_SK"), "bool")
        if self.shape.p.mask is None:
            return ok
        cond = cast(self.at_key(self.shape.p.mask), "bool")
        return cond if ok is None else ir.Bin("and", ok, cond, "bool")

    def scored(self, s, unit: float = 1.0) -> ir.Expr:
        """Score `s` of key _jc plus the pattern's added term (times `unit`: log2(e) where
        the scores are in base 2), -inf where the score's kept condition fails."""
        p = self.shape.p
        if p.bias is not None:
            bias = cast(self.at_key(p.bias), F)
            s = ir.Bin("+", s, bias if unit == 1.0 else ir.Bin("*", bias, lit(unit, F), F), F)
        if p.keep is not None:
            s = ir.Select(cast(self.at_key(p.keep), "bool"), s, NEG, F)
        return s

    def at_key(self, e) -> ir.Expr:
        """The pattern's expression `e` over (batch, head, query, key) at (_b, _h, _qc, _jc)."""
        p, low = self.shape.p, self.low
        scope = {p.batch_var: ("_b", self.idx), p.head_var: ("_h", self.idx),
                 p.query_var: ("_qc", self.idx), p.key_var: ("_jc", self.idx)}
        low.scopes.append({n: v for n, v in scope.items() if n is not None})
        try:
            return low.expr(e)
        finally:
            low.scopes.pop()

    @property
    def tracks_first(self) -> bool:
        """Whether each query keeps its first admitted key (`_fa`) and its first admitted key
        whose score is not -inf (`_fn`), where the loops' result turns on them: an online
        form makes a row NaN whose first admitted score is -inf (its first update takes
        exp(-inf - -inf), NaN, into the sum however many keys follow; flash attention's
        first update is of its first key block, so there a first block of -inf), and under a
        key condition a row whose every admitted score is -inf is NaN (exp(-inf - -inf))
        where a row with no admitted key stores 0, the sum (0 both) telling them apart nowhere."""
        p = self.shape.p
        return p.form in ONLINE_FORMS + ("flash",) or (p.mask is not None and p.empty_row != "nan")

    @property
    def kept_firsts(self) -> tuple:
        """Which first keys a query needs (`tracks_first`): its first admitted one (`_fai`)
        only under a key condition other than a causal one (key 0 is every query's first
        otherwise), its first not -inf (`_fni`) only where an online form's or flash's
        result turns on it."""
        p = self.shape.p
        if not self.tracks_first:
            return ()
        return ((("_fai",) if p.mask is not None and not p.causal else ())
                + (("_fni",) if p.form in ONLINE_FORMS + ("flash",) else ()))

    def first_limit(self) -> int:
        """Where key 0 is every query's first, the keys past which none decides `_fni`'s
        test: an online form's first, flash's first block."""
        return self.shape.p.block_kv if self.shape.p.form == "flash" else 1

    def first_rows(self, rows: int, kept=("_fai", "_fni")) -> list:
        """A thread's first keys (`tracks_first`) of each of its `rows` rows, none yet:
        `_fai` admitted, `_fni` admitted and not -inf (those `kept`)."""
        if not self.tracks_first or not kept:
            return []
        SK = self.ref("_SK")
        return [*(ir.Array(a, self.idx, rows) for a in kept),
                self.loop("_i", rows, lambda i: [ir.Store(a, i, SK) for a in kept])]

    def note_row(self, arr, row, key, cond) -> ir.Store:
        """`key` into the first key `arr` of the thread's row `row` where `cond` (None: always)."""
        old = ir.Load(arr, row, self.idx)
        new = ir.Math("min", (old, key), self.idx)
        return ir.Store(arr, row, new if cond is None else ir.Select(cond, new, old, self.idx))

    def first_of_row(self, row, lanes: int, kept=("_fai", "_fni")) -> list:
        """`_fa` and `_fn` of the thread's row `row`: the smallest of the `lanes` lanes sharing
        it, of those `kept`; `_fa` not kept is key 0 (admitted to every query)."""
        if not self.tracks_first:
            return []
        return [ir.Decl(v, self.idx, ir.Collective("min", ir.Load(a, row, self.idx), "warp", self.idx, lanes)
                        if a in kept else self.i(0))
                for v, a in (("_fa", "_fai"), ("_fn", "_fni")) if a in kept or v == "_fa"]

    def note_first(self, ok, score) -> list:
        """Key _j into `_fa` where admitted (`ok`), into `_fn` where its `score` is not -inf too."""
        idx, j = self.idx, self.ref("_j")
        first = lambda var, cond: ir.Set(var, ir.Select(
            cond, ir.Math("min", (self.ref(var), j), idx), self.ref(var), idx))
        return [first("_fa", ok), first("_fn", ir.Bin("and", ok, _alive(score), "bool"))]

    def step(self) -> list:
        """Score `chunk` keys, then one online-softmax update of (m, l, o)."""
        idx, ch = self.idx, self.chunk
        s_u = ir.Load("_s", self.ref("_u"), F)
        # the sum starts from the first slot's product (no addition of a zero)
        product = lambda c: self.dot(self.reg("_qr", c), self.key_value("k", c))
        dot = self.each_slot("_d", lambda c: [ir.Set("_dot", ir.Bin(
            "+", ir.Ref("_dot", F), product(c), F))], 1)
        ok, sc, noted = self.admitted(), self.scored(ir.Ref("_dot", F)), []
        if self.tracks_first:       # the condition and the score named, each read thrice
            noted = [ir.Decl("_ok", "bool", ok), ir.Decl("_sc", F, sc)]
            ok, sc = ir.Ref("_ok", "bool"), ir.Ref("_sc", F)
            noted += self.note_first(ok, sc)
        # a key the condition leaves out adds nothing to o (0 * its value would: NaN for inf)
        gated = ok is not None
        score = self.key_index() + [
            ir.Decl("_dot", F, product(self.i(0)), True), *dot, *noted,
            *([ir.Store("_ka", self.ref("_u"), ir.Select(ok, self.i(1), self.i(0), idx))] if gated else []),
            ir.Store("_s", self.ref("_u"), ir.Select(ok, sc, NEG, F)),
            ir.Set("_mt", ir.Math("max", (ir.Ref("_mt", F), s_u), F))]
        alive = _alive
        weight = ir.Select(alive(s_u), ir.Math("exp", (ir.Bin("-", s_u, ir.Ref("_mt", F), F),), F), ZERO, F)
        # the update runs while every score so far is -inf too (no maximum yet: a factor of 1),
        # so that an admitted key of -inf score adds 0 * its value as the loops do (NaN for a
        # NaN or inf value)
        update = [
            ir.Decl("_alpha", F, ir.Select(alive(ir.Ref("_mt", F)), ir.Math(
                "exp", (ir.Bin("-", ir.Ref("_m", F), ir.Ref("_mt", F), F),), F), lit(1.0, F), F)),
            ir.Set("_l", self.mul(ir.Ref("_l", F), ir.Ref("_alpha", F))),
            *self.each_slot("_d", lambda c: [ir.Store("_o", c, self.mul(self.reg("_o", c), self.vec(ir.Ref("_alpha", F))))],
                            role="v"),
            *self.unrolled(ir.For("_u", self.i(0), self.i(ch), self.i(1), tuple(
                [ir.Decl("_p", F, weight), ir.Set("_l", ir.Bin("+", ir.Ref("_l", F), ir.Ref("_p", F), F))]
                + self.key_index()[:1] + ([] if self.P.tiles else self.key_index()[1:])
                + self.admitted_only(self.each_slot("_d", lambda c: [ir.Store("_o", c, ir.Bin(
                    "+", self.reg("_o", c), self.mul(self.vec(ir.Ref("_p", F)), self.key_value("v", c)),
                    self.FV))], role="v"), gated)),
                idx, unroll=True)),
            ir.Set("_m", ir.Ref("_mt", F))]
        return [ir.Array("_s", F, ch), *([ir.Array("_ka", idx, ch)] if gated else []),
                ir.Decl("_mt", F, ir.Ref("_m", F), True),
                *self.unrolled(ir.For("_u", self.i(0), self.i(ch), self.i(1), tuple(score), idx,
                                      unroll=True)),
                *update]

    def admitted_only(self, stmts: list, gated: bool) -> list:
        """`stmts` run for key _u of the step only where it is admitted (`gated`)."""
        if not gated:
            return stmts
        return [ir.If(ir.Bin("!=", ir.Load("_ka", self.ref("_u"), self.idx), self.i(0), "bool"), tuple(stmts))]

    def merge(self) -> list:
        """The lanes of a query combine their (m, l, o) through shared memory: the largest
        maximum M, each lane's l and o scaled by e^(m - M) and summed (o lane by lane into
        lane 0, over the K/V tile, which every thread is done with); the first keys, the
        smallest of the lanes'."""
        idx, R, T, dc = self.idx, self.P.lanes, self.bq * self.P.lanes, self.Cv
        q, t = self.ref("_q"), self.ref("_t")
        slot = self.add(self.mul(q, self.i(R)), self.ref("_x"))
        stat = lambda off: ir.Load("_ml", self.add(slot, self.i(off)) if off else slot, F)
        scale = lambda m: ir.Select(ir.Bin("<=", m, NEG, "bool"), ZERO,
                                    ir.Math("exp", (ir.Bin("-", m, ir.Ref("_M", F), F),), F), F)
        row = lambda d: self.add(self.mul(q, self.i(dc)), d)
        each_lane = lambda body, start=0: ir.For("_x", self.i(start), self.i(R), self.i(1), tuple(body), idx)
        first = ([], [])
        if self.tracks_first:
            keys = lambda off: ir.Load("_fk", self.add(slot, self.i(off)) if off else slot, idx)
            first = ([ir.Array("_fk", idx, self.ml_count, "shared"), ir.Store("_fk", t, self.ref("_fa")),
                      ir.Store("_fk", self.add(t, self.i(T)), self.ref("_fn"))],
                     [each_lane([ir.Set(v, ir.Math("min", (self.ref(v), keys(off)), idx))
                                 for v, off in (("_fa", 0), ("_fn", T))])])
        return [
            ir.Array("_ml", F, self.ml_count, "shared"),
            ir.Store("_ml", t, ir.Ref("_m", F)), ir.Store("_ml", self.add(t, self.i(T)), ir.Ref("_l", F)),
            *first[0],
            ir.Barrier(),
            *first[1],
            ir.Decl("_M", F, NEG, True),
            each_lane([ir.Set("_M", ir.Math("max", (ir.Ref("_M", F), stat(0)), F))]),
            ir.Decl("_L", F, ZERO, True),
            each_lane([ir.Decl("_mx", F, stat(0)),
                       ir.Set("_L", ir.Bin("+", ir.Ref("_L", F), self.mul(stat(T), scale(ir.Ref("_mx", F))), F))]),
            ir.Decl("_f", F, scale(ir.Ref("_m", F))),
            *self.each_slot("_d", lambda c: [ir.Store("_o", c, self.mul(self.reg("_o", c), self.vec(ir.Ref("_f", F))))],
                            role="v"),
            each_lane([
                ir.If(ir.Bin("==", self.ref("_r"), self.ref("_x"), "bool"),
                      tuple(self.each_slot("_d", lambda c: [ir.Store("_kv", row(c), self.reg("_o", c))], role="v"))),
                ir.Barrier(),
                ir.If(ir.Bin("==", self.ref("_r"), self.i(0), "bool"),
                      tuple(self.each_slot("_d", lambda c: [ir.Store("_o", c, ir.Bin(
                          "+", self.reg("_o", c), ir.Load("_kv", row(c), self.FV), self.FV))], role="v"))),
                ir.Barrier()], 1)]

    def reciprocal(self, L, first: bool = False, dead_in_sum: bool = False) -> ir.Expr:
        """1 / L, the factor of a query's zero output where L = 0, which is a query no key
        is admitted to, or one whose every admitted score is -inf. The loops make the
        second NaN (exp(-inf - -inf)), 1 / L times 0 here; the first 0 / 0 where the body
        divides by the sum outside its key loop (`empty_row` "nan"), else 0. Which of the
        two a query is: with no key condition, whether there are keys; with one, whether
        the query's first admitted key `_fa` is a key (where the kernel keeps it, `first`;
        else it is taken as none). An online form's row whose first admitted score is -inf
        (`_fa` before `_fn`) is NaN whatever follows, flash attention's whose first key block
        of the program's is all -inf (`tracks_first`; unless the kernel made such a row's
        L NaN, `dead_in_sum`)."""
        p, SK = self.shape.p, self.ref("_SK")
        inv = ir.Bin("/", lit(1.0, F), L, F)
        if p.empty_row != "nan":
            had_key = (ir.Bin("<", self.ref("_fa"), SK, "bool") if first
                       else ir.Bin(">", SK, self.i(0), "bool") if p.mask is None else None)
            empty = ir.Bin("==", L, ZERO, "bool")
            if had_key is not None:
                empty = ir.Bin("and", empty, ir.Un("not", had_key, "bool"), "bool")
            inv = ir.Select(empty, ZERO, inv, F)
        if first and p.form in ONLINE_FORMS + ("flash",) and not dead_in_sum:
            fn = self.ref("_fn")
            dead = ir.Bin("<", self.ref("_fa"), fn, "bool")
            if p.form == "flash":           # (no key condition: _fa is key 0)
                whole = ir.Bin("or", ir.Bin("==", fn, SK, "bool"), ir.Bin(">=", fn, self.i(p.block_kv), "bool"), "bool")
                dead = ir.Bin("and", dead, whole, "bool")
            inv = ir.Select(dead, NAN, inv, F)
        return inv

    def store(self) -> list:
        """Lane 0 of each query in range stores o / L."""
        out = self.shape.bufs["out"]
        inv = self.reciprocal(ir.Ref("_L", F), self.tracks_first)
        ok = ir.Bin("<", self.ref("_qi"), self.ref("_S"), "bool")
        if self.P.lanes > 1:
            ok = ir.Bin("and", ok, ir.Bin("==", self.ref("_r"), self.i(0), "bool"), "bool")

        def put(c, w):
            d = self.col(c, w)
            v = cast(self.mul(self.lane(self.reg("_o", c), w), ir.Ref("_inv", F)), out.dtype)
            guard = None if self.exact else ir.Bin("<", d, self.Dv, "bool")
            return ir.Store(user_name(out.name), self.add(self.ref("_orow"), d), v, guard)
        return [ir.If(ok, (ir.Decl("_inv", F, inv), *self.each_slot(
            "_d", lambda c: [put(c, w) for w in range(self.W)], role="v")))]

    # ---- a key the condition leaves out, in a tiled P V ----------------------------------
    # P V as a product over a tile weighs a key the condition leaves out 0, and 0 * a NaN or
    # inf value is NaN where the loops never read the value. Such a NaN is rare (a value that
    # is not finite) and stays NaN to the end, so the products keep their speed: a row whose
    # output has a NaN (`_bad`) stores the loops' value of each NaN element again, summed
    # over the keys the condition admits alone (`mend`).

    def nan_flag(self, values) -> list:
        """`_bad`: whether any of `values` (f32) is NaN; nothing without a key condition."""
        if self.shape.p.mask is None:
            return []
        bad = ir.Decl("_bad", "bool", lit(False, "bool"), True)
        return [bad] + [ir.Set("_bad", ir.Bin("or", ir.Ref("_bad", "bool"), ir.Bin("!=", v, v, "bool"), "bool"))
                        for v in values]

    def mend(self, orow, cols: int, col_of, m, unit: float, exp: str) -> list:
        """Where `_bad`, each of the thread's `cols` columns col_of(_mc) of the output row that
        starts at `orow` (query _qi, factor _inv) that holds NaN again as the loops make it: the sum
        over the admitted keys of exp(score - m) V (scores as the softmax makes them: times
        `_scale`, the added term times `unit`, in base `exp`)."""
        if self.shape.p.mask is None:
            return []
        r, idx, out = self.ref, self.idx, self.shape.bufs["out"]
        dst, at = user_name(out.name), self.add(orow, r("_oc"))
        bh = (r("_b"), r("_h"))
        qrow, krow = self.row_offset("q", *bh, r("_qc")), self.row_offset("k", *bh, r("_j"))
        dot = ir.Ref("_dt", F)
        s = ir.Ref("_ds", F)
        key = [ir.Decl("_dt", F, ZERO, True),
               ir.For("_rd", self.i(0), self.i(self.dcap), self.i(1), (ir.Set("_dt", ir.Bin("+", dot, ir.Bin(
                   "*", self.element("q", qrow, r("_rd"), True), self.element("k", krow, r("_rd"), True), F), F)),),
                   idx),
               ir.Decl("_ds", F, self.scored(ir.Bin("*", dot, ir.Ref("_scale", F), F), unit)),
               ir.Decl("_dw", F, ir.Select(ir.Bin("==", s, NEG, "bool"), ZERO,
                                          ir.Math(exp, (ir.Bin("-", s, m, F),), F), F)),
               ir.Set("_ev", ir.Bin("+", ir.Ref("_ev", F), ir.Bin(
                   "*", ir.Ref("_dw", F), self.element("v", self.row_offset("v", *bh, r("_j")), r("_oc"), True), F),
                   F))]
        ok = self.admitted()
        keys = ir.For("_rj", self.i(0), r("_SK"), self.i(1), (
            ir.Decl("_j", idx, r("_rj")), ir.Decl("_jc", idx, r("_rj")),
            *(key if ok is None else [ir.If(ok, tuple(key))])), idx)
        again = (ir.Decl("_ev", F, ZERO, True), keys,
                 ir.Store(dst, at, cast(ir.Bin("*", ir.Ref("_ev", F), ir.Ref("_inv", F), F), out.dtype)))
        is_nan = ir.Bin("!=", ir.Ref("_ov", F), ir.Ref("_ov", F), "bool")
        each = ir.For("_mc", self.i(0), self.i(cols), self.i(1), (
            ir.Decl("_oc", idx, col_of(r("_mc"))), ir.Decl("_ov", F, cast(ir.Load(dst, at, out.dtype), F)),
            ir.If(is_nan, again)), idx)
        return [ir.If(ir.Ref("_bad", "bool"), (ir.Decl("_qc", idx, r("_qi")), each))]


class _Products(_Kernel):
    """Q K^T and P V as register-tiled products, for a head_dim of 16 to 64 in steps of 16.

    A block of 64 / `cols` x 64 / `rows` threads (tx, ty) takes 64 queries of one head. Per
    64-key tile: S = Q K^T, each thread a rows x cols piece (queries rows ty.., keys cols tx..)
    from d-major Q and K tiles in shared memory (Q scaled once); the online softmax runs on
    those registers, a query's maximum and sum reduced over the 64 / cols consecutive lanes
    that share it; P goes to shared memory over the K tile (a thread's `rows` values of a key
    at a rotated place, 16 bytes at a time, so that the threads of a warp meet different
    banks) and O += P V gives each thread a rows x head_dim cols / 64 piece of the output. With
    `prefetch`, the next tile's K and V rows are read into registers while this one is computed.

    The sizes are baked in: where the keys fill whole tiles, no key bound is tested."""

    BQ = BKV = 64
    vector = False              # K and V rows read 16 bytes at a time (Program.aligned)
    vector_q = False            # Q rows too

    def kernel(self):
        p, low, idx, P = self.shape.p, self.low, self.idx, self.P
        D, BQ, BKV = self.dcap, self.BQ, self.BKV
        R, C = self.R, self.C = P.rows, P.cols
        self.NTY, self.NTX = BQ // R, BKV // C          # threads down and across a tile
        T = self.T = self.NTX * self.NTY
        self.exp = "exp2" if P.exp2 else "exp"
        TD = self.TD = D // self.NTX                    # output columns a thread
        self.D = lit(D, idx)
        B, H, S, SK = (self.size(e) for e in (p.n_batch, p.n_heads, p.n_queries, p.n_keys))
        # the sizes are baked in (products_fit): the key count is known here
        self.full = int(recognise.launch_value(p.n_keys, self.low.sizes)) % BKV == 0
        scale = low.operand(p.scale, F)
        if P.exp2:                          # scores in base 2: exp(x) = exp2(x log2(e))
            scale = ir.Bin("*", scale, lit(LOG2E, F), F)
        r = self.ref
        body = [ir.Decl("_S", idx, S), ir.Decl("_SK", idx, SK),
                ir.Decl("_nqb", idx, ir.Bin("/", self.add(S, self.i(BQ - 1)), self.i(BQ), idx)),
                ir.Decl("_bh", idx, ir.Bin("/", self.at("block"), r("_nqb"), idx)),
                ir.Decl("_h", idx, ir.Bin("%", r("_bh"), H, idx)),
                ir.Decl("_b", idx, ir.Bin("/", r("_bh"), H, idx)),
                ir.Decl("_q0", idx, self.mul(ir.Bin("%", self.at("block"), r("_nqb"), idx), self.i(BQ))),
                ir.Decl("_t", idx, self.at("thread")),
                ir.Decl("_tx", idx, ir.Bin("%", r("_t"), self.i(self.NTX), idx)),
                ir.Decl("_ty", idx, ir.Bin("/", r("_t"), self.i(self.NTX), idx))]
        bh = (r("_b"), r("_h"))
        kv_regs = 4 * self.groups(BKV)
        body += [ir.Decl("_qbase", idx, self.row_offset("q", *bh, self.i(0))),
                 ir.Decl("_kbase", idx, self.row_offset("k", *bh, self.i(0))),
                 ir.Decl("_vbase", idx, self.row_offset("v", *bh, self.i(0))),
                 ir.Decl("_obase", idx, self.row_offset("out", *bh, self.i(0))),
                 ir.Decl("_scale", F, scale),
                 ir.Array("_qs", F, D * BQ, "shared"),
                 ir.Array("_kp", F, max(D * BKV, BKV * BQ), "shared"),
                 ir.Array("_vs", F, BKV * D, "shared"),
                 *self.load_q(),
                 ir.Array("_kr", F, kv_regs), ir.Array("_vr", F, kv_regs),
                 ir.Array("_o", F, R * TD), ir.Array("_mi", F, R), ir.Array("_li", F, R),
                 self.loop("_i", R, lambda i: [ir.Store("_mi", i, NEG), ir.Store("_li", i, ZERO)]),
                 *self.first_rows(R, self.kept_firsts),
                 self.loop("_i", R * TD, lambda i: [ir.Store("_o", i, ZERO)]),
                 ir.Decl("_next", idx, self.i(0), True)]
        if P.prefetch:
            body += self.prefetch()
            tile = [ir.Barrier(), self.stage(), ir.Barrier(),
                    ir.Set("_next", self.add(r("_k0"), self.i(BKV))),
                    ir.If(ir.Bin("<", r("_next"), r("_SK"), "bool"), tuple(self.prefetch()))]
        else:
            # the reads issued before the barrier: their wait overlaps it
            tile = [ir.Set("_next", r("_k0")), *self.prefetch(), ir.Barrier(), self.stage(), ir.Barrier()]
        tile += self.scores() + self.softmax() + self.values()
        body.append(ir.For("_k0", self.i(0), r("_SK"), self.i(BKV), tuple(tile), idx))
        body += self.finish()
        name = kernel_name(self.k, self.suffix or "")
        # the register cap (no spills, nvcc sm_90): 4 x 4 scores, two blocks of 256 threads a
        # multiprocessor; 32 scores (128 threads, about 170 registers, 245 with the prefetch
        # registers) three blocks, two with the prefetch
        blocks_per_sm = P.occupancy or (2 if T == 256 or P.prefetch else 3)
        k = ir.Kernel(name, buffer_params(self.k, self.low.sizes, idx), tuple(body), T, idx,
                      f"attention, head_dim {D}: 64 queries x 64 keys per step as register-tiled "
                      f"products ({R} x {C} and {R} x {TD} per thread)", min_blocks=blocks_per_sm)
        blocks = ir.Bin("*", ir.Bin("*", B, H, idx), ir.ceildiv(self.size(p.n_queries), BQ), idx)
        return k, blocks

    # ---- pieces -----------------------------------------------------------------------

    def groups(self, rows) -> int:
        """A thread's groups of four elements of a `rows` x head_dim tile."""
        return rows * self.dcap // (4 * self.T)

    def load_q(self) -> list:
        """The block's Q rows, times the scale, into shared memory d-major: four elements of
        a row per thread and group, one 16-byte load where the program has them (`vector_q`)."""
        r, BQ, n = self.ref, self.BQ, self.groups(self.BQ)
        at = lambda w: self.add(self.mul(self.add(self.mul(r("_qd4"), self.i(4)), w), self.i(BQ)), r("_qj"))
        if not self.vector_q:
            return [self.chunks("_w", n, lambda e: self.rows_of(e, BQ, "_qj", "_qd4") + [
                self.quad(lambda w: ir.Store("_qs", at(w), self.mul(
                    self.row_element("q", r("_q0"), r("_qj"), r("_S"), r("_qd4"), w), ir.Ref("_scale", F))))])]
        q = self.shape.bufs["q"]
        j = self.add(r("_q0"), r("_qj"))
        src = self.add(r("_qbase"), self.mul(j, self.seq_stride("q")), self.mul(r("_qd4"), self.i(4)))
        zero = tuple(ir.Store("_qr", self.i(w), ZERO) for w in range(4))
        return [ir.Array("_qr", F, 4), self.chunks("_w", n, lambda e: self.rows_of(e, BQ, "_qj", "_qd4") + [
            ir.If(ir.Bin("<", j, r("_S"), "bool"), (ir.Copy("_qr", self.i(0), user_name(q.name), src, 4, F),), zero),
            self.quad(lambda w: ir.Store("_qs", at(w), self.mul(ir.Load("_qr", w, F), ir.Ref("_scale", F))))])]

    def loop(self, var, n, body_of, unroll=True):
        return ir.For(var, self.i(0), self.i(n), self.i(1), tuple(body_of(self.ref(var))),
                      self.idx, unroll=unroll)

    def quad(self, store_of) -> ir.For:
        """The four consecutive elements a thread moves at once."""
        return self.loop("_x", 4, lambda w: [store_of(w)])

    def chunks(self, var, n, body_of) -> ir.For:
        """for each of a thread's `n` groups of four: element e = thread + T var."""
        return self.loop(var, n, lambda w: [ir.Decl("_e", self.idx, self.add(
            self.ref("_t"), self.mul(w, self.i(self.T))))] + body_of(self.ref("_e")))

    def rows_of(self, e, rows, row, col4) -> list:
        """Element group e as (row, group of four columns) with consecutive e in consecutive rows."""
        return [ir.Decl(row, self.idx, ir.Bin("%", e, self.i(rows), self.idx)),
                ir.Decl(col4, self.idx, ir.Bin("/", e, self.i(rows), self.idx))]

    def row_element(self, role, first, row, count, col4, w, bounded=True) -> ir.Expr:
        """Element 4 col4 + w of row first + row of the (b, h) slice of `role`; 0 past `count`
        rows (the index kept in range) unless the rows are known to be in range."""
        j = self.add(first, row)
        jc = ir.Math("min", (j, ir.Bin("-", count, self.i(1), self.idx)), self.idx) if bounded else j
        base = self.ref({"q": "_qbase", "k": "_kbase", "v": "_vbase"}[role])
        at = self.add(base, self.mul(jc, self.seq_stride(role)), self.mul(col4, self.i(4)), w)
        v = cast(ir.Load(user_name(self.shape.bufs[role].name), at, self.shape.bufs[role].dtype), F)
        return ir.Select(ir.Bin("<", j, count, "bool"), v, ZERO, F) if bounded else v

    def kv_rows(self, e) -> list:
        """K: consecutive threads take consecutive keys; V: consecutive groups of a row."""
        D4 = self.dcap // 4
        return (self.rows_of(e, self.BKV, "_kj", "_kd4")
                + [ir.Decl("_vj", self.idx, ir.Bin("/", e, self.i(D4), self.idx)),
                   ir.Decl("_vd4", self.idx, ir.Bin("%", e, self.i(D4), self.idx))])

    def prefetch(self) -> list:
        """The K and V rows of tile _next into registers."""
        r = self.ref
        at = self.mul(r("_w"), self.i(4))
        return [self.chunks("_w", self.groups(self.BKV), lambda e: self.kv_rows(e)
                            + self.group("_kr", at, "k", r("_kj"), r("_kd4"))
                            + self.group("_vr", at, "v", r("_vj"), r("_vd4")))]

    def group(self, dst, at, role, row, col4) -> list:
        """Elements 4 col4 .. 4 col4 + 3 of key row _next + row of `role` into dst[at..]:
        one 16-byte load where the program has them (`vector`), 0 past the keys."""
        r = self.ref
        if not self.vector:
            return [self.quad(lambda w: ir.Store(dst, self.add(at, w), self.row_element(
                role, r("_next"), row, r("_SK"), col4, w, not self.full)))]
        j = self.add(r("_next"), row)
        base = r("_kbase" if role == "k" else "_vbase")
        src = self.add(base, self.mul(j, self.seq_stride(role)), self.mul(col4, self.i(4)))
        load = ir.Copy(dst, at, user_name(self.shape.bufs[role].name), src, 4, F)
        if self.full:
            return [load]
        zero = tuple(ir.Store(dst, self.add(at, self.i(w)), ZERO) for w in range(4))
        return [ir.If(ir.Bin("<", j, r("_SK"), "bool"), (load,), zero)]

    def stage(self) -> ir.For:
        """The fetched rows into shared memory: K d-major, V row-major."""
        r = self.ref
        slot = lambda w: self.add(self.mul(r("_w"), self.i(4)), w)
        return self.chunks("_w", self.groups(self.BKV), lambda e: self.kv_rows(e) + [
            self.quad(lambda w: ir.Store("_kp", self.add(self.mul(self.add(
                self.mul(r("_kd4"), self.i(4)), w), self.i(self.BKV)), r("_kj")), ir.Load("_kr", slot(w), F))),
            self.quad(lambda w: ir.Store("_vs", self.add(self.mul(r("_vj"), self.i(self.dcap)),
                                                         self.mul(r("_vd4"), self.i(4)), w), ir.Load("_vr", slot(w), F)))])

    def s_at(self, i, j) -> ir.Expr:
        """Where a thread keeps the score of its query i and key j: key by key, so that a
        key's `rows` values go to P 16 bytes at a time."""
        return self.add(self.mul(j, self.i(self.R)), i)

    def scores(self) -> list:
        """s[i][j] = sum_d Qs[d][rows ty + i] Ks[d][cols tx + j]."""
        r, R, C = self.ref, self.R, self.C
        a = lambda i: ir.Load("_qs", self.add(self.mul(r("_d"), self.i(self.BQ)), self.mul(r("_ty"), self.i(R)), i), F)
        b = lambda j: ir.Load("_kp", self.add(self.mul(r("_d"), self.i(self.BKV)), self.mul(r("_tx"), self.i(C)), j), F)
        fma = self.loop("_i", R, lambda i: [self.loop("_jj", C, lambda j: [ir.Store("_s", self.s_at(i, j), ir.Bin(
            "+", ir.Load("_s", self.s_at(i, j), F), self.mul(a(i), b(j)), F))])])
        return [ir.Array("_s", F, C * R), self.loop("_i", C * R, lambda i: [ir.Store("_s", i, ZERO)]),
                self.unrolled_by("_d", self.dcap, 8, [fma])]

    def unrolled_by(self, var, n, k, body, head=()) -> ir.For:
        """for var in 0..n (n a multiple of k), k iterations written out per step (`head`
        first in each step, where var0 is the step's first value)."""
        r = self.ref
        inner = self.loop(var + "u", k, lambda u: [ir.Decl(var, self.idx, self.add(r(var + "0"), u))] + body)
        return ir.For(var + "0", self.i(0), self.i(n), self.i(k), (*head, inner), self.idx)

    def softmax(self) -> list:
        """Per query row: mask, the row's maximum and sum over its threads, the rescale."""
        r, idx, R, C, TD, W = self.ref, self.idx, self.R, self.C, self.TD, self.NTX
        s = lambda: ir.Load("_s", self.s_at(r("_i"), r("_jj")), F)
        put = lambda v: ir.Store("_s", self.s_at(r("_i"), r("_jj")), v)
        keys = [ir.Decl("_j", idx, self.add(r("_k0"), self.mul(r("_tx"), self.i(C)), r("_jj"))),
                ir.Decl("_jc", idx, ir.Math("min", (r("_j"), ir.Bin("-", r("_SK"), self.i(1), idx)), idx))]
        ok = self.admitted()
        raw = s()
        biased = self.scored(raw, LOG2E if self.P.exp2 else 1.0)
        mask = [] if ok is None and biased is raw else [put(biased if ok is None else ir.Select(ok, biased, NEG, F))]
        kept, i, j = self.kept_firsts, self.ref("_i"), self.ref("_j")
        alive_first = [self.note_row("_fni", i, j, _alive(s()))]
        first_alive = []
        if "_fai" in kept:          # (a key not admitted scores -inf by now)
            mask += [self.note_row("_fai", i, j, ok)] + (alive_first if "_fni" in kept else [])
        elif kept:                  # key 0 every query's first: the first tiles alone decide
            first_alive = [ir.If(ir.Bin("<", r("_k0"), self.i(self.first_limit()), "bool"), (
                self.loop("_jj", C, lambda _: keys + alive_first),))]
        exp = lambda x: ir.Math(self.exp, (x,), F)
        mx = ir.Ref("_mx", F)
        mn = ir.Ref("_mn", F)
        is_neg = lambda x: ir.Bin("==", x, NEG, "bool")
        # the larger of two without NaN's rule (a compare and a select): a NaN score is left
        # out of the maximum but reaches l and o through its exp, so the row is NaN all the same
        larger = lambda a, b: ir.Select(ir.Bin("<", a, b, "bool"), b, a, F)
        row = [ir.Decl("_qi", idx, self.add(r("_q0"), self.mul(r("_ty"), self.i(R)), r("_i"))),
               ir.Decl("_qc", idx, ir.Math("min", (r("_qi"), ir.Bin("-", r("_S"), self.i(1), idx)), idx)),
               ir.Decl("_mx", F, NEG, True),
               self.loop("_jj", C, lambda _: keys + mask + [ir.Set("_mx", larger(mx, s()))]),
               *first_alive,
               ir.Set("_mx", ir.Collective("max", mx, "warp", F, W)),
               # each exponential computed before its select (a select of a value, not a
               # branch around the exponential: the row's exponentials then interleave)
               ir.Decl("_mn", F, larger(ir.Load("_mi", r("_i"), F), mx)),
               ir.Decl("_ea", F, exp(ir.Bin("-", ir.Load("_mi", r("_i"), F), mn, F))),
               ir.Decl("_alpha", F, ir.Select(is_neg(mn), lit(1.0, F), ir.Ref("_ea", F), F)),
               ir.Decl("_rs", F, ZERO, True),
               self.loop("_jj", C, lambda _: [
                   ir.Decl("_es", F, exp(ir.Bin("-", s(), mn, F))),
                   put(ir.Select(is_neg(s()), ZERO, ir.Ref("_es", F), F)),
                   ir.Set("_rs", ir.Bin("+", ir.Ref("_rs", F), s(), F))]),
               ir.Set("_rs", ir.Collective("+", ir.Ref("_rs", F), "warp", F, W)),
               ir.Store("_li", r("_i"), ir.Bin("+", self.mul(ir.Load("_li", r("_i"), F), ir.Ref("_alpha", F)),
                                               ir.Ref("_rs", F), F)),
               ir.Store("_mi", r("_i"), mn),
               self.loop("_dd", TD, lambda dd: [ir.Store(
                   "_o", self.add(self.mul(r("_i"), self.i(TD)), dd),
                   self.mul(ir.Load("_o", self.add(self.mul(r("_i"), self.i(TD)), dd), F),
                            ir.Ref("_alpha", F)))])]
        return [self.loop("_i", R, lambda _: row)]

    def rotation(self, group) -> ir.Expr:
        """(ty + group) mod (threads down a tile): where key group `group` (key / 4) keeps a
        thread's `rows` values of P, so that a warp's stores of four keys meet different banks."""
        return ir.Bin("&", self.add(self.ref("_ty"), group), self.i(self.NTY - 1), self.idx)

    def p_at(self, j, i, rot) -> ir.Expr:
        """Where P[j][rows ty + i] is kept: at the rotation `rot` (a name) of j's group of
        four, declared once per group of four keys (no division per key)."""
        return self.add(self.mul(j, self.i(self.BQ)), self.mul(self.ref(rot), self.i(self.R)), i)

    def values(self) -> list:
        """P over the K tile, then o[i][dd] += sum_j P[j][rows ty + i] V[j][tx TD + dd]."""
        r, TD, R, C = self.ref, self.TD, self.R, self.C
        # a thread stores keys C tx.., by groups of four (group C/4 tx + g, rotated by it)
        jj = lambda g, j: self.add(self.mul(g, self.i(4)), j)
        jt = lambda g, j: self.add(self.mul(r("_tx"), self.i(C)), jj(g, j))
        store_p = self.loop("_g", C // 4, lambda g: [
            ir.Decl("_prot", self.idx, self.rotation(self.add(self.mul(r("_tx"), self.i(C // 4)), g))),
            self.loop("_jj", 4, lambda j: [self.loop("_i4", R // 4, lambda i4: [ir.Copy(
                "_kp", self.p_at(jt(g, j), self.mul(i4, self.i(4)), "_prot"),
                "_s", self.s_at(self.mul(i4, self.i(4)), jj(g, j)), 4, F)])])])
        acc = self.loop("_i", R, lambda i: [self.loop("_dd", TD, lambda dd: [ir.Store(
            "_o", self.add(self.mul(i, self.i(TD)), dd), ir.Bin(
                "+", ir.Load("_o", self.add(self.mul(i, self.i(TD)), dd), F), self.mul(
                    ir.Load("_kp", self.p_at(r("_j"), i, "_rot"), F),
                    ir.Load("_vs", self.add(self.mul(r("_j"), self.i(self.dcap)),
                                            self.mul(r("_tx"), self.i(TD)), dd), F)), F))])])
        # the products read four keys a step (group j0 / 4)
        return [ir.Barrier(), store_p, ir.Barrier(),
                self.unrolled_by("_j", self.BKV, 4, [acc], head=[ir.Decl("_rot", self.idx, self.rotation(
                    ir.Bin(">>", r("_j0"), self.i(2), self.idx)))])]

    def finish(self) -> list:
        """Each query in range stores its row piece o / l."""
        r, idx, TD = self.ref, self.idx, self.TD
        out = self.shape.bufs["out"]
        inv = self.reciprocal(ir.Load("_li", r("_i"), F), self.tracks_first)
        row = self.add(r("_obase"), self.mul(r("_qi"), self.seq_stride("out")), self.mul(r("_tx"), self.i(TD)))
        o = lambda i, dd: ir.Load("_o", self.add(self.mul(i, self.i(TD)), dd), F)
        put = self.loop("_dd", TD, lambda dd: [ir.Store(user_name(out.name), self.add(row, dd), cast(
            self.mul(o(r("_i"), dd), ir.Ref("_inv", F)), out.dtype))])
        # (a key left out weighed 0 in P V: `mend`)
        mend = self.mend(self.add(r("_obase"), self.mul(r("_qi"), self.seq_stride("out"))), TD,
                         lambda c: self.add(self.mul(r("_tx"), self.i(TD)), c), ir.Load("_mi", r("_i"), F),
                         LOG2E if self.P.exp2 else 1.0, self.exp)
        return [self.loop("_i", self.R, lambda i: [
            *self.first_of_row(i, self.NTX, self.kept_firsts),
            ir.Decl("_qi", idx, self.add(r("_q0"), self.mul(r("_ty"), self.i(self.R)), i)),
            ir.If(ir.Bin("<", r("_qi"), r("_S"), "bool"), (
                ir.Decl("_inv", F, inv), *self.nan_flag([o(i, self.i(dd)) for dd in range(TD)]), put, *mend))])]
