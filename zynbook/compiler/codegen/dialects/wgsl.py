"""WGSL: the WebGPU Shading Language spelling of the launch IR.

A program is one WGSL module: the buffer parameters are `var<storage>` bindings in their
order (inputs, output; an input the kernel writes is `read_write`), then the error flag
(compiler/errflag.py: `array<atomic<i32>>`, word 0 the first failing site, word 1 its
value) where the program has sites, then one uniform struct `ZynParams` holding the scalar
arguments and the sizes that are not baked in (4-byte scalars, and f64 scalar arguments
where the adapter has `shader-f64`: 8 bytes, aligned to 8, as `runtime.uniform_layout`
places them). Each launch-IR kernel is one `@compute` entry point; a block is a
workgroup, `block` the linear workgroup id of a 1-D, 2-D or 3-D dispatch (the device splits
large grids, runtime.split_workgroups) and `blocks` their count.

What WGSL cannot hold is refused with a `ZynMLDeviceError` (the kernel then has no WebGPU
program and the device says why): 64-bit integer values past 32 bits (their buffers are
held in 32 bits, as the device holds them, and take 32-bit values: their arithmetic is
i32's (u64's u32's), checked where the lowering could not prove it in range), f64 without the
adapter's `shader-f64` (and, with it, f64 atomics), warp collectives and
lanes (subgroups have the width the adapter chooses; a block all-reduction of f32, i32 or
u32 is spelled with them, `_block_collective`). Types WGSL does hold narrower than 32 bits
are stored widened (i8, i16 as i32; u8, u16 as u32; bool as u32; bf16 as f32, rounded to
bfloat16 where the program casts to it; f16 as f32 without `shader-f16`, rounded to f16
likewise), and their arithmetic wraps at their own width, as the reference's does. Float
min and max propagate NaN, as numpy's do, and so do x * 0, 0 / x and x - x (`unfolded`),
which a shader compiler may fold to 0. (Other identities it may apply are not spelled
around in the program's own arithmetic: SPIR-V lets a driver reassociate float operations
not decorated NoContraction, and naga decorates none, so llvmpipe folds (a + b) - a to b,
(x + 1e8) - 1e8 to x and (x * 3.0) * 0.1 to x * 0.3: a compensated sum loses its
compensation there, though the WGSL keeps it as written. The helpers' own two-part sums and
products keep theirs: each step whose rounding matters passes through `zyn_hide_f32`/`_f64`.)
"""
from __future__ import annotations

import math

import numpy as np

from ....errors import ZynMLDeviceError
from ...launch import ir
from ...launch.scalar import compute_dtype
from .cfamily import Helpers, banner

# launch-IR dtype -> the WGSL type it is computed in (and stored as, but bool: u32)
TYPES = {"f32": "f32", "f16": "f16", "bf16": "f32", "i32": "i32", "u32": "u32", "i8": "i32",
         "i16": "i32", "u8": "u32", "u16": "u32", "bool": "bool"}
NARROW = {"i8": 8, "i16": 16, "u8": 8, "u16": 16}
REFUSED = {"i64": "64-bit integers", "u64": "64-bit integers",
           "f64": "f64 without the adapter's `shader-f64`"}
# what 64-bit float shaders compute (Vulkan's GLSL.std.450 has no 64-bit exp, log, erf or
# trigonometry: those are helpers); the renderer entry refuses kernels needing more before
# printing
F64_MATH = {"min", "max", "clamp", "relu", "abs", "floor", "ceil", "round", "sqrt", "rsqrt",
            "pow2", "fmod", "exp", "exp2", "log", "log2", "tanh", "sigmoid", "silu", "sinh", "cosh",
            "sin", "cos", "tan", "erf", "gelu", "pow"}
BIN_OPS = {"and": "&&", "or": "||"}
ERR = "zyn_err"
PARAMS = "zyn_p"

_UNARY_BUILTINS = {"sqrt", "floor", "ceil", "round", "abs"}

# i64 (u64) + - * ** of values held in i32 (u32) (launch IR's CheckedDiv): the wrapped
# value, a site failing where the exact one is past 32 bits
_CHECKED_ARITH = {"+": "add_past32", "-": "sub_past32", "*": "mul_past32", "**": "pow_past32"}


# 64-bit integer buffers are stored in 32 bits (the device refuses data that does not fit):
# a value converted to them from a 32-bit integer is stored as it is; 64-bit arithmetic
# comes as i32 arithmetic (launch/scalar.py: `narrowed`)
STORED_32 = {"i64": "i32", "u64": "u32"}
_FITS = {"i64": ("i32", "i16", "i8", "u16", "u8", "bool"), "u64": ("u32", "u16", "u8", "bool")}


class AdapterLimit(ZynMLDeviceError):
    """A program the dialect spells but this adapter cannot run (too many buffers)."""


def storage(dtype: str) -> str:
    """The WGSL element type of a buffer of `dtype`."""
    if dtype == "bool":
        return "u32"
    return "f64" if dtype == "f64" else TYPES[STORED_32.get(dtype, dtype)]


class WgslDialect(Helpers):
    name = "wgsl"
    # WGSL evaluates an expression of constants when the shader is made, and refuses one
    # whose value is not finite: the printer spells such values itself
    evaluates_constants = True
    def __init__(self, f16: bool = False, max_storage_buffers: int = 8, f64: bool = False,
                 write_out: bool = True, loop_budget: bool = False):
        # a driver that budgets a thread's loop iterations (llvmpipe) spends one on the
        # error flag's loop at every check a thread passes (its branches run masked): there
        # the flag is set by one compare-exchange, which is strong on its backends (SPIR-V,
        # GLSL)
        self.loop_budget = loop_budget
        # WGSL has no unroll hint: the printer writes register loops out (constant indices)
        self.writes_out_unrolled = write_out
        self.f16 = f16
        self.f64 = f64
        self.max_storage_buffers = max_storage_buffers
        self.needed: list = []          # helper names, in first-use order
        self.atomics: set = set()        # buffers updated atomically: declared atomic<T>
        self.workgroup: list = []       # module-scope var<workgroup> declarations
        self.workgroup_bytes = 0
        self.uses_f16 = False
        self.kernel_block = 1
        self.uniforms: list = []        # (field, WGSL type, ir.Param) of ZynParams
        self.block_fns: dict = {}       # block all-reductions: name -> WGSL function

    # ---- refusals ---------------------------------------------------------------------

    def refuse(self, what: str):
        raise ZynMLDeviceError(f"the WGSL dialect cannot spell {what}")

    def type(self, dtype: str) -> str:
        if ir.lanes_of(dtype) > 1:
            return f"vec{ir.lanes_of(dtype)}<{self.type(ir.element_of(dtype))}>"
        if dtype == "f64" and self.f64:
            return "f64"
        if dtype in REFUSED:
            self.refuse(REFUSED[dtype])
        if dtype == "f16":
            if not self.f16:        # held in f32, rounded to f16 where converted to it
                return "f32"
            self.uses_f16 = True
        if dtype not in TYPES:
            self.refuse(f"the dtype {dtype}")
        return TYPES[dtype]

    # ---- helpers, emitted only when used ----------------------------------------------

    def deps(self, name: str) -> tuple:
        return _deps(name)

    def helpers_text(self) -> str:
        out = [_FAIL_ONCE if n == "zyn_fail" and self.loop_budget else _helper(n)
               for n in self.needed] + list(self.block_fns.values())
        return "\n".join(out) + ("\n\n" if out else "")

    # ---- values -----------------------------------------------------------------------

    def lit(self, value, dtype: str) -> str:
        if dtype in STORED_32 and not ir.lanes_of(dtype) > 1:
            # a 64-bit integer constant that fits 32 bits, as its buffers hold them: it can
            # only meet 64-bit values in a comparison or a store (their arithmetic is
            # refused), where 32 bits give the same answer; one that does not fit is refused
            info = np.iinfo(np.int32 if dtype == "i64" else np.uint32)
            if not info.min <= int(value) <= info.max:
                self.refuse(REFUSED[dtype])
            dtype = STORED_32[dtype]
        t = self.type(dtype)
        if t == "bool":
            return "true" if value else "false"
        if t in ("f32", "f16", "f64"):
            v = float(value)
            if math.isnan(v) or math.isinf(v):
                bits = "7fc00000" if math.isnan(v) else ("7f800000" if v > 0 else "ff800000")
                text = f"bitcast<f32>(0x{bits}u)"
                return text if t == "f32" else f"{t}({text})"
            if t == "f64":
                # an abstract float, exact in 64 bits, converted to f64
                text = repr(v) if ("." in repr(v) or "e" in repr(v)) else repr(v) + ".0"
                return f"f64({text})"
            # numpy's shortest text that reads back as the same f32 (or f16)
            with np.errstate(over="ignore"):
                x = (np.float32 if t == "f32" else np.float16)(v)
            if np.isinf(x):
                return self.lit(float(x), dtype)
            text = str(x)
            mant, _, exp = text.partition("e")
            if "." not in mant:
                mant += ".0"
            text = mant + (f"e{exp}" if exp else "") + ("h" if t == "f16" else "f")
            return f"({text})" if v < 0 or text.startswith("-") else text
        v = int(value)
        if t == "u32":
            if dtype in NARROW:
                v &= (1 << NARROW[dtype]) - 1
            if not 0 <= v < 2 ** 32:
                self.refuse(f"the {dtype} constant {v}")
            return f"{v}u"
        if not -2 ** 31 <= v < 2 ** 31:
            self.refuse(f"the {dtype} constant {v}")
        if v == -2 ** 31:
            return "i32(-2147483647 - 1)"
        return f"{v}i" if v >= 0 else f"({v}i)"

    def vector(self, parts, dtype):
        return f"{self.type(dtype)}({', '.join(parts)})"

    def lane(self, text, lane, dtype):
        return f"{text}[{lane}]"

    def zero(self, dtype):
        return self.lit(0, dtype)

    def narrow(self, text: str, dtype: str) -> str:
        """`text` (an i32 or u32) wrapped to the width of a narrow integer dtype (modular
        arithmetic: no shift of a signed value, which overflows in a constant)."""
        bits = NARROW[dtype]
        if dtype.startswith("u"):
            return f"({text} & {(1 << bits) - 1}u)"
        half = 1 << (bits - 1)
        return f"((({text} + {half}i) & {2 * half - 1}i) - {half}i)"

    def cast(self, text: str, src: str, dst: str) -> str:
        if src in _FITS.get(dst, ()):       # into a 64-bit buffer stored in 32 bits
            return self.cast(text, src, STORED_32[dst])
        if src in STORED_32 and dst not in STORED_32:     # read from one
            return self.cast(text, STORED_32[src], dst)
        a, b = self.type(src), self.type(dst)
        if dst == "bool":
            if src == "bool":
                return text
            return self.binary("!=", text, self.zero(src), src, "bool")
        if src == "bool":
            return f"select({self.zero(dst)}, {self.lit(1, dst)}, {text})"
        if dst == "f16" and src == "f64":
            # through f32 rounded to odd, so that the second rounding is numpy's one
            text, src = f"{self.need('zyn_f32_odd')}({text})", "f32"
        if dst == "bf16":
            # from f64 through f32 (rounded twice, as torch's conversion is)
            return f"{self.need('zyn_bf16')}({self.cast(text, src, 'f32')})" if src != "bf16" else text
        if dst == "f16" and src != "f16":
            # rounded by the helper first: a driver may fold f32(f16(x)) back into x
            rounded = f"{self.need('zyn_f16')}({self.cast(text, src, 'f32')})"
            return rounded if not self.f16 else f"f16({rounded})"
        out = text if a == b else f"{b}({text})"
        if dst in NARROW and src != dst and not (src in NARROW and NARROW[src] <= NARROW[dst]
                                                  and src[0] == dst[0]):
            out = self.narrow(out, dst)
        return out

    def select(self, c, a, b, dtype):
        self.type(dtype)
        return f"select({b}, {a}, {c})"

    def binary(self, op, a, b, operand_dtype, dtype):
        if operand_dtype in STORED_32 and op in ("==", "!=", "<", "<=", ">", ">="):
            # 64-bit integers compared: every one the dialect spells is a value of a buffer
            # stored in 32 bits, a conversion into one or a constant that fits, so the
            # comparison in 32 bits is exact (`if mask[i, j]` of an i64 mask)
            operand_dtype = STORED_32[operand_dtype]
        if operand_dtype == "bool" and op in ("<", "<=", ">", ">="):
            # WGSL orders no bools: false < true compared as 0 < 1, as numpy compares them
            a, b, operand_dtype = f"select(0i, 1i, {a})", f"select(0i, 1i, {b})", "i32"
        t = self.type(operand_dtype)
        if op in ("/", "%") and t == "i32":
            # signed division and remainder through unsigned ones, truncating as C
            # whatever the backend does with signs (OpenGL leaves them undefined)
            return f"{self.need('zyn_tdiv' if op == '/' else 'zyn_trem')}({a}, {b})"
        if op in ("==", "!=") and a == b and t in ("f32", "f16", "f64"):
            # x != x asks whether x is NaN, which a shader compiler may fold to false (WGSL
            # lets it assume no NaN; NVIDIA's does): the bits are tested instead
            nan = f"{self.need('zyn_isnan_' + ('f64' if t == 'f64' else 'f32'))}({a if t != 'f16' else f'f32({a})'})"
            return nan if op == "!=" else f"(!{nan})"
        if op == "!=" and t in ("f32", "f16", "f64"):
            # true for NaN, as IEEE's (and numpy's) !=: some backends compile a float !=
            # to an ordered comparison, false for NaN
            return f"(!({a} == {b}))"
        folded = self.unfolded(op, a, b, t)
        if folded is not None:
            return folded
        if op in ("<<", ">>") and t != "u32":
            b = f"u32({b})"         # WGSL shifts by a u32 count
        text = f"({a} {BIN_OPS.get(op, op)} {b})"
        if dtype in NARROW and op in ("+", "-", "*"):
            return self.narrow(text, dtype)
        return text

    def unfolded(self, op, a, b, t):
        """x * 0, 0 * x, 0 / x and x - x of f32 and f64 through helpers: a shader compiler
        may fold them to 0 (WGSL lets it assume no NaN or infinity; llvmpipe's did), where
        numpy's are NaN for a NaN or infinite x (0 / x for a zero x too); x + 0.0, x - -0.0
        and 0.0 - x too, which it may fold to x and -x, where numpy's are 0.0 for a zero x
        (-0.0 + 0.0 is 0.0). None for others."""
        if t not in ("f32", "f64") or op not in ("*", "/", "-", "+"):
            return None
        zeros = (self.lit(0.0, t), self.lit(-0.0, t))
        if op == "+" and zeros[0] in (a, b) or op == "-" and b == zeros[1]:
            x = b if op == "+" and a == zeros[0] else a
            return f"{self.need('zyn_addz_' + t)}({x})"
        if op == "-" and a == zeros[0]:
            return f"{self.need('zyn_addz_' + t)}(-{b})"
        if op == "*" and (a in zeros or b in zeros):
            x, z = (b, a) if a in zeros else (a, b)
            return f"{self.need('zyn_mulz_' + t)}({x}, {z})"
        if op == "/" and a in zeros:
            return f"{self.need('zyn_zdiv_' + t)}({a}, {b})"
        if op == "-" and a == b:
            return f"{self.need('zyn_mulz_' + t)}(abs({a}), {zeros[0]})"   # +0, or NaN as x * 0
        return None

    def unary(self, op, a, dtype):
        t = self.type(dtype)
        if op == "not":
            return f"(!{a})"
        text = f"(0u - {a})" if t == "u32" else f"(-{a})"
        return self.narrow(text, dtype) if dtype in NARROW else text

    def math(self, fn, args, dtype):
        t = self.type(dtype)
        if fn in ir.WRAPPING:       # (WGSL's integers wrap)
            return f"({args[0]} {ir.WRAPPING[fn]} {args[1]})"
        if fn == ir.WRAPPING_NEG:
            return f"(-{args[0]})"
        if fn in ("min", "max", "clamp", "relu") and t in ("i32", "u32", "f32", "f64"):
            # integers: WGSL's own; floats: the helpers that propagate NaN
            spell = (lambda f: f) if t in ("i32", "u32") else (lambda f: self.need(f"zyn_{f}_{t}"))
            if fn == "clamp":   # numpy's clip: x itself where it equals a bound (-0.0 at 0.0)
                return f"{spell('min')}({args[2]}, {spell('max')}({args[1]}, {args[0]}))"
            if fn == "relu":
                return f"{spell('max')}({args[0]}, {self.zero(dtype)})"
            return self.fold(spell(fn), args)
        if t in ("i32", "u32"):
            if fn == "abs":
                if t == "u32":
                    return args[0]
                return self.narrow(f"abs({args[0]})", dtype) if dtype in NARROW else f"abs({args[0]})"
            if fn == "ipow":
                text = f"{self.need('zyn_ipow_' + t)}({args[0]}, {args[1]})"
                return self.narrow(text, dtype) if dtype in NARROW else text
            self.refuse(f"{fn}() on {dtype}")
        if fn == "dot":
            return f"dot({args[0]}, {args[1]})"
        if t == "f64" and fn not in F64_MATH:
            self.refuse(f"{fn}() in 64 bits")
        if t not in ("f32", "f64"):
            self.refuse(f"{fn}() on {dtype}")
        if fn in ("sin", "cos", "tan"):
            return f"{self.need('zyn_' + fn + '_' + t)}({args[0]})"
        if fn in _UNARY_BUILTINS:
            return f"{fn}({args[0]})"
        if fn == "rsqrt":
            return f"({self.lit(1.0, dtype)} / sqrt({args[0]}))"
        if fn == "pow2":
            return f"{self.need('zyn_sq_' + t)}({args[0]})"
        if fn == "fmod":
            return f"{self.need('zyn_fmod_' + t)}({args[0]}, {args[1]})"
        if fn in ("tanh", "sinh", "cosh", "exp", "exp2", "log", "log2", "sigmoid", "silu",
                  "gelu", "erf", "pow"):
            return f"{self.need('zyn_' + fn + '_' + t)}({', '.join(args)})"
        self.refuse(f"{fn}()")

    def fold(self, fn: str, args: list) -> str:
        out = args[0]
        for a in args[1:]:
            out = f"{fn}({out}, {a})"
        return out

    def thread(self, axis):
        if axis == "thread":
            return "zyn_thread"
        if axis == "threads":
            return f"{self.kernel_block}i"
        if axis == "block":
            return "zyn_block"
        if axis == "blocks":
            return "zyn_blocks"
        self.refuse(f"the thread axis `{axis}` (no subgroups in this dialect yet)")

    def collective(self, op, value, scope, dtype, width=0):
        if scope == "warp" and width and op in BLOCK_OPS and dtype in ("f32", "i32", "u32"):
            return self.lanes_collective(op, value, dtype, width)
        if scope != "block" or op not in BLOCK_OPS or dtype not in ("f32", "i32", "u32"):
            self.refuse(f"a {scope} collective")
        t, n = TYPES[dtype], self.kernel_block
        fn = f"zyn_block_{BLOCK_OPS[op]}_{t}_{n}"
        if fn not in self.block_fns:
            self.block_fns[fn] = _block_collective(fn, op, t, n, self.need)
            self.array(f"zyn_bred_{t}_{n}", dtype, n, "shared")
        return f"{fn}({value}, zyn_lid.x, zyn_sg_lid, zyn_sg_size)"

    def lanes_collective(self, op, value, dtype, width):
        """The all-reduction over each group of `width` consecutive lanes: a butterfly of
        subgroup shuffles, as the adapter's subgroups hold whole groups (Target.lane_groups:
        they are at least that wide, and consecutive local ids, as `_block_collective`
        takes them). Float max and min propagate NaN, as numpy's do."""
        t = TYPES[dtype]
        fn = f"zyn_lanes_{BLOCK_OPS[op]}_{t}_{width}"
        if fn not in self.block_fns:
            steps = []
            mask = width // 2
            while mask:
                other = f"subgroupShuffleXor(x, {mask}u)"
                steps.append(f"    x = {self.math(op, ['x', other], dtype) if op != '+' else f'x + {other}'};")
                mask //= 2
            self.block_fns[fn] = f"fn {fn}(v: {t}) -> {t} {{\n    var x = v;\n" + \
                "\n".join(steps) + "\n    return x;\n}"
        return f"{fn}({value})"

    def copy(self, dst, di, dspace, src, si, sspace, count, dtype):
        """`count` consecutive elements, one by one (a storage buffer is an array of
        scalars, so there is no vector access to make)."""
        at = lambda base, w: f"{base} + {w}i" if w else base
        return "{ let zyn_cd = " + di + "; let zyn_cs = " + si + "; " + " ".join(
            self.store(dst, at("zyn_cd", w), self.load(src, at("zyn_cs", w), dtype, sspace), dtype, dspace)
            for w in range(count)) + " }"

    # ---- memory and checks ------------------------------------------------------------

    def load(self, array, index, dtype, space):
        # (64-bit integers are held in 32 bits in every space: buffers, and the arrays a
        # thread or a block declares)
        self.type(STORED_32.get(dtype, dtype))
        if array in self.atomics:
            raw = f"atomicLoad(&{array}[{index}])"
            return f"bitcast<f32>({raw})" if dtype == "f32" else raw
        if dtype == "bool" and space in ("global", "scratch", "shared"):
            return f"({array}[{index}] != 0u)"
        return f"{array}[{index}]"

    def store(self, array, index, value, dtype, space):
        dtype = STORED_32.get(dtype, dtype)
        self.type(dtype)
        if array in self.atomics:
            v = f"bitcast<u32>({value})" if dtype == "f32" else value
            return f"atomicStore(&{array}[{index}], {v});"
        if dtype == "bool" and space in ("global", "scratch", "shared"):
            return f"{array}[{index}] = select(0u, 1u, {value});"
        return f"{array}[{index}] = {value};"

    def atomic(self, op, array, index, value, dtype):
        t = self.type(dtype)
        if dtype in NARROW or dtype == "bool" or op not in ("+", "max", "min"):
            self.refuse(f"an atomic {op}= on {dtype}")
        if t in ("i32", "u32"):
            fn = {"+": "atomicAdd", "max": "atomicMax", "min": "atomicMin"}[op]
            return f"{fn}(&{array}[{index}], {value});"
        new = {"+": "bitcast<f32>(zyn_old) + zyn_v",
               "max": f"{self.need('zyn_max_f32')}(bitcast<f32>(zyn_old), zyn_v)",
               "min": f"{self.need('zyn_min_f32')}(bitcast<f32>(zyn_old), zyn_v)"}[op]
        # float atomics: compare-exchange on the bits until no other thread came between
        return (f"{{ let zyn_i = {index}; let zyn_v: f32 = {value}; "
                f"var zyn_old: u32 = atomicLoad(&{array}[zyn_i]); loop {{ "
                f"let zyn_r = atomicCompareExchangeWeak(&{array}[zyn_i], zyn_old, bitcast<u32>({new})); "
                f"if (zyn_r.exchanged) {{ break; }} zyn_old = zyn_r.old_value; }} }}")

    def checked(self, index, extent, site, dtype):
        self.type(dtype)
        return f"{self.need('zyn_chk')}({index}, {extent}, {site}i)"

    def in_range(self, index, extent, site, dtype):
        self.type(dtype)
        return f"{self.need('zyn_in')}({index}, {extent}, {site}i)"

    def checked_div(self, op, a, b, s0, sov, dtype):
        self.type(dtype)
        if op in _CHECKED_ARITH:
            fn = ("zyn_u" if dtype == "u32" else "zyn_i") + _CHECKED_ARITH[op]
            return f"{self.need(fn)}({a}, {b}, {sov}i)"
        if op == "/":
            return f"{self.need('zyn_idiv_' + dtype)}({a}, {b}, {s0}i, {sov}i)"
        return f"{self.need('zyn_irem_' + dtype)}({a}, {b}, {s0}i)"

    # ---- statements -------------------------------------------------------------------

    def decl(self, name, dtype, value, mutable):
        t = self.type(STORED_32.get(dtype, dtype))     # (an element of a 64-bit array)
        if value is None:
            return f"var {name}: {t};"
        return f"{'var' if mutable else 'let'} {name}: {t} = {value};"

    def for_header(self, var, dtype, start, stop, step):
        t = self.type(dtype)
        inc = f"{var}++" if step in ("1i", "1u") else f"{var} += {step}"
        return f"for (var {var}: {t} = {start}; {var} < {stop}; {inc})"

    def barrier(self, device=False):
        return "storageBarrier(); workgroupBarrier();" if device else "workgroupBarrier();"

    def array(self, name, dtype, count, space):
        # bools in workgroup memory are u32s, as in buffers: Naga gives a workgroup array
        # of bool a 1-byte stride, which NVIDIA's Vulkan driver got wrong (reduce(and))
        el = "u32" if dtype == "bool" and space == "shared" else self.type(STORED_32.get(dtype, dtype))
        decl = f"array<{el}, {max(count, 1)}>"
        if space == "shared":
            text = f"var<workgroup> {name}: {decl};"
            if any(w.split(":")[0] == text.split(":")[0] and w != text for w in self.workgroup):
                self.refuse(f"two workgroup arrays `{name}` of different types in one module")
            if text not in self.workgroup:
                self.workgroup.append(text)
                el = ir.element_of(dtype)
                self.workgroup_bytes += max(count, 1) * ir.lanes_of(dtype) * (
                    2 if el == "f16" else 8 if el == "f64" else 4)
            return f"// {name}: workgroup memory, declared above"
        return f"var {name}: {decl};"

    # ---- kernels and the program ------------------------------------------------------

    def kernel_open(self, k, params):
        self.kernel_block = k.block
        self.type(k.index_dtype)
        for p in k.params:
            if p.kind in ("buffer", "scratch"):
                # refused here, before any text, where WGSL lacks it
                self.type(STORED_32.get(p.dtype, p.dtype) if p.kind == "buffer" else p.dtype)
        self.atomics |= {n.array for n in ir.walk(k.body) if isinstance(n, ir.Atomic)}
        lines = [f"// {k.comment}"] if k.comment else []
        lines += [f"@compute @workgroup_size({k.block})",
                  f"fn {k.name}(@builtin(workgroup_id) zyn_wg: vec3<u32>, "
                  "@builtin(num_workgroups) zyn_nwg: vec3<u32>, "
                  "@builtin(local_invocation_id) zyn_lid: vec3<u32>"
                  + (", @builtin(subgroup_invocation_id) zyn_sg_lid: u32, "
                     "@builtin(subgroup_size) zyn_sg_size: u32" if any(
                         isinstance(n, ir.Collective) and n.scope == "block"
                         for n in ir.walk(k.body)) else "") + ") {",
                  "    // the linear workgroup id of a dispatch of up to three dimensions",
                  "    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));",
                  "    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);",
                  "    let zyn_thread: i32 = i32(zyn_lid.x);"]
        for p in params:
            if p.kind in ("scalar", "size"):
                ct = p.dtype if p.kind == "size" else compute_dtype(p.dtype)
                t = self.type(ct)
                field = f"{PARAMS}.{p.name}"
                value = f"({field} != 0u)" if ct == "bool" else field
                lines.append(f"    let {p.name}: {t} = {value};")
                if p.name not in (u[0] for u in self.uniforms):
                    self.uniforms.append((p.name, storage(ct), p))
        return "\n".join(lines)

    def kernel_close(self, k):
        return "}"

    def bindings(self, program) -> list:
        """(binding, name, role, access, WGSL element type, dtype) of the module, in order;
        role: the buffer parameter's name, "@error" or "@params"."""
        out = []
        # f16 elements are f32 where the adapter has no shader-f16 (self.type says which)
        elem = lambda dtype: storage(dtype) if dtype != "f16" else self.type("f16")  # noqa: E731
        for p in program.kernels[0].params:
            if p.kind == "buffer":
                out.append((len(out), p.name, p.name, "read_write" if p.writable else "read",
                            elem(p.dtype), p.dtype))
        for sc in program.scratch:
            self.type(sc.dtype)
            out.append((len(out), sc.name, "@scratch:" + sc.name, "read_write", elem(sc.dtype),
                        sc.dtype))
        if program.sites:
            out.append((len(out), ERR, "@error", "read_write", "i32", "i32"))
        if len(out) > self.max_storage_buffers:
            raise AdapterLimit(
                f"kernel {program.name} needs {len(out)} storage buffers; this adapter allows "
                f"{self.max_storage_buffers} per shader stage")
        if self.uniforms:
            out.append((len(out), PARAMS, "@params", "uniform", "", ""))
        return out

    def program_head(self, program, sizes) -> str:
        for p in program.kernels[0].params:
            if p.kind == "buffer":
                self.type(STORED_32.get(p.dtype, p.dtype))
        head = banner("WGSL", program, sizes)
        if self.uses_f16:
            head.insert(0, "enable f16;")
        if self.uniforms:
            head += ["", "struct ZynParams {"] + [f"    {f}: {t}," for f, t, _ in self.uniforms] + ["}"]
        head.append("")
        for binding, name, role, access, elem, dtype in self.bindings(program):
            if access == "uniform":
                head.append(f"@group(0) @binding({binding}) var<uniform> {PARAMS}: ZynParams;")
                continue
            if role == "@error":
                elem = "atomic<i32>"
            elif name in self.atomics:
                elem = "atomic<u32>" if elem == "f32" else f"atomic<{elem}>"
            note = f"  // {dtype}" if dtype != elem and role != "@error" else ""
            head.append(f"@group(0) @binding({binding}) var<storage, {access}> {name}: array<{elem}>;{note}")
        if self.workgroup:
            head += [""] + self.workgroup
        return "\n".join(head) + "\n\n"

    def program_tail(self, program, sizes) -> str:
        return ""


BLOCK_OPS = {"+": "add", "max": "max", "min": "min"}


def _block_collective(fn: str, op: str, t: str, n: int, need) -> str:
    """A block all-reduction for `n` invocations: each round every subgroup combines its
    values and its first invocation writes the partial, until one is left (two barriers a
    round). Subgroups are consecutive local invocation ids, as on every Vulkan, Metal and
    D3D12 driver for a 1-D workgroup; their width is the adapter's, read at run time."""
    arr = f"zyn_bred_{t}_{n}"
    sub = {"+": "subgroupAdd", "max": "subgroupMax", "min": "subgroupMin"}[op]
    ident = {"+": {"f32": "0.0f", "i32": "0i", "u32": "0u"},
             "max": {"f32": "bitcast<f32>(0xff800000u)", "i32": "i32(-2147483647 - 1)", "u32": "0u"},
             "min": {"f32": "bitcast<f32>(0x7f800000u)", "i32": "2147483647i",
                     "u32": "4294967295u"}}[op][t]
    if t == "f32" and op != "+":
        # subgroupMin/Max leave NaN undefined: a NaN anywhere is the result, as numpy's
        red = (f"select({sub}(x), bitcast<f32>(0x7fc00000u), "
               f"subgroupAny({need('zyn_isnan_f32')}(x)))")
    else:
        red = f"{sub}(x)"
    return (f"fn {fn}(v: {t}, lid: u32, sg_lid: u32, sg_size: u32) -> {t} {{\n"
            f"    var x = v;\n    var cnt: u32 = {n}u;\n    loop {{\n"
            f"        let r = {red};\n        workgroupBarrier();\n"
            f"        if (sg_lid == 0u) {{ {arr}[lid / sg_size] = r; }}\n"
            f"        workgroupBarrier();\n"
            f"        cnt = (cnt + sg_size - 1u) / sg_size;\n"
            f"        if (cnt <= 1u) {{ break; }}\n"
            f"        x = select({ident}, {arr}[min(lid, cnt - 1u)], lid < cnt);\n    }}\n"
            f"    return {arr}[0];\n}}")


# ------------------------------------------------------------------------- helpers


# the helpers a helper calls, emitted before it in this order (zyn_idiv_*, zyn_irem_*: _deps)
_DEPS = {
    **dict.fromkeys(("zyn_chk", "zyn_in", "zyn_iadd_past32", "zyn_isub_past32", "zyn_uadd_past32",
                     "zyn_usub_past32", "zyn_umul_past32"), ("zyn_fail",)),
    "zyn_imul_past32": ("zyn_fail", "zyn_tdiv"),
    "zyn_ipow_past32": ("zyn_imul_past32",), "zyn_upow_past32": ("zyn_umul_past32",),
    **dict.fromkeys(("zyn_max_f32", "zyn_min_f32", "zyn_isnan_f64", "zyn_tanh_f32"), ("zyn_isnan_f32",)),
    "zyn_f32_odd": ("zyn_isnan_f32", "zyn_hide_f64"),
    **dict.fromkeys(("zyn_max_f64", "zyn_min_f64", "zyn_fmod_f64"), ("zyn_isnan_f64",)),
    **dict.fromkeys(("zyn_erf_f32", "zyn_erfc_f32", "zyn_sigmoid_f32", "zyn_silu_f32"), ("zyn_exp_f32",)),
    **dict.fromkeys(("zyn_sinh_f32", "zyn_cosh_f32"), ("zyn_exp_f32", "zyn_half_f32")),
    "zyn_gelu_f32": ("zyn_erfc_f32", "zyn_ddmul_f32"), "zyn_log2_f32": ("zyn_log_f32",),
    "zyn_pow_f32": ("zyn_isnan_f32", "zyn_isfinite_f32", "zyn_pow_pos_f32", "zyn_powi_f32"),
    "zyn_powi_f32": ("zyn_ddmul_f32", "zyn_pow2i_f32", "zyn_hide_f32"), "zyn_ddmul_f32": ("zyn_hide_f32", "zyn_isnan_f32"),
    "zyn_pow_pos_f32": ("zyn_isfinite_f32", "zyn_exp_f32", "zyn_pow2i_f32", "zyn_powi_f32", "zyn_twosum_f32"),
    "zyn_mulz_f32": ("zyn_isfinite_f32",),
    **dict.fromkeys(("zyn_mulz_f64", "zyn_zdiv_f64"), ("zyn_isfinite_f32", "zyn_isnan_f32")),
    **dict.fromkeys(("zyn_sin_f32", "zyn_cos_f32"), ("zyn_reduce_pio2", "zyn_isfinite_f32", "zyn_sin_poly")),
    "zyn_tan_f32": ("zyn_reduce_pio2", "zyn_isfinite_f32"),
    "zyn_reduce_pio2": ("zyn_mul32", "zyn_bits_from"),
    "zyn_exp_f64": ("zyn_isnan_f64", "zyn_hide_f64"), "zyn_log_parts_f64": ("zyn_isnan_f64", "zyn_frexp_f64"),
    **dict.fromkeys(("zyn_exp2_f64", "zyn_tanh_f64", "zyn_sigmoid_f64", "zyn_silu_f64", "zyn_sinh_f64",
                     "zyn_cosh_f64"), ("zyn_exp_f64",)),
    **dict.fromkeys(("zyn_log_f64", "zyn_log2_f64"), ("zyn_log_parts_f64",)),
    **dict.fromkeys(("zyn_twoprod_f64", "zyn_twosum_f64"), ("zyn_hide_f64",)), "zyn_twosum_f32": ("zyn_hide_f32",),
    "zyn_reduce_pio2_f64": ("zyn_frexp_f64", "zyn_mul32", "zyn_bits_from", "zyn_twoprod_f64", "zyn_hide_f64"),
    **dict.fromkeys(("zyn_sin_f64", "zyn_cos_f64"), ("zyn_isnan_f64", "zyn_reduce_pio2_f64", "zyn_trig_k_f64")),
    "zyn_tan_f64": ("zyn_isnan_f64", "zyn_reduce_pio2_f64", "zyn_tan_k_f64"), "zyn_tan_k_f64": ("zyn_twoprod_f64",),
    "zyn_erfc_tail_f64": ("zyn_exp_f64", "zyn_twoprod_f64"),
    **dict.fromkeys(("zyn_erf_f64", "zyn_erfc_f64"), ("zyn_erfc_tail_f64",)),
    "zyn_gelu_f64": ("zyn_erfc_f64", "zyn_twoprod_f64"),
    "zyn_powi_f64": ("zyn_frexp_f64", "zyn_twoprod_f64", "zyn_hide_f64"),
    "zyn_log_dd_f64": ("zyn_frexp_f64", "zyn_twosum_f64", "zyn_twoprod_f64"),
    "zyn_pow_pos_f64": ("zyn_log_dd_f64", "zyn_exp_f64"),
    "zyn_pow_f64": ("zyn_powi_f64", "zyn_pow_pos_f64"),
}


def _deps(name: str) -> tuple:
    if name.startswith(("zyn_idiv_", "zyn_irem_")):   # a signed one truncates through zyn_tdiv/trem
        return ("zyn_fail",) + (("zyn_tdiv" if "idiv" in name else "zyn_trem",) if name[9] == "i" else ())
    return _DEPS.get(name, ())


_INT_MIN = {"i32": "i32(-2147483647 - 1)", "i16": "(-32768i)", "i8": "(-128i)"}

_FAIL_ONCE = """\
// the error flag (zynbook/compiler/errflag.py): the first failing site and its value win
fn zyn_fail(site: i32, v: i32) {
    if (atomicCompareExchangeWeak(&zyn_err[0], 0i, site).exchanged) { atomicStore(&zyn_err[1], v); }
}"""

def _pow_past32(k: str) -> str:
    """The checked power of i32 (`k` "i") or u32 ("u") values held in 32 bits: by squaring,
    each product checked (zyn_imul_past32, zyn_umul_past32)."""
    t = k + "32"
    return (f"fn zyn_{k}pow_past32(a0: {t}, b0: {t}, site: i32) -> {t} {{\n"
            f"    var r = 1{k}; var a = a0;\n"
            f"    for (var b = b0; b > 0{k}; b = b / 2{k}) {{\n"
            f"        if (b % 2{k} == 1{k}) {{ r = zyn_{k}mul_past32(r, a, site); }}\n"
            f"        if (b > 1{k}) {{ a = zyn_{k}mul_past32(a, a, site); }}\n"
            "    }\n"
            "    return r; }")


_FIXED = {
    "zyn_fail": """\
// the error flag (zynbook/compiler/errflag.py): the first failing site and its value win
fn zyn_fail(site: i32, v: i32) {
    loop {
        let r = atomicCompareExchangeWeak(&zyn_err[0], 0i, site);
        if (r.exchanged) { atomicStore(&zyn_err[1], v); break; }
        if (r.old_value != 0i) { break; }
    }
}""",
    "zyn_chk": """\
// an index outside 0..n-1 fails the site and reads element 0 instead
fn zyn_chk(i: i32, n: i32, site: i32) -> i32 {
    if (i < 0i || i >= n) { zyn_fail(site, i); return 0i; } return i; }""",
    "zyn_tdiv": """\
// signed division and remainder truncating as C, through unsigned ones
fn zyn_tdiv(a: i32, b: i32) -> i32 {
    let q = bitcast<i32>(bitcast<u32>(abs(a)) / bitcast<u32>(abs(b)));
    return select(q, -q, (a < 0i) != (b < 0i)); }""",
    "zyn_trem": """\
fn zyn_trem(a: i32, b: i32) -> i32 {
    let r = bitcast<i32>(bitcast<u32>(abs(a)) % bitcast<u32>(abs(b)));
    return select(r, -r, a < 0i); }""",
    "zyn_in": """\
fn zyn_in(i: i32, n: i32, site: i32) -> bool {
    if (i < 0i || i >= n) { zyn_fail(site, i); return false; } return true; }""",
    # (wrapping through u32; the exact value is past i32 where the wrapped one is on the
    # wrong side of a, or, for a product, does not divide back to b)
    "zyn_iadd_past32": """\
// 64-bit integer arithmetic held in 32 bits: a value past them fails the site
fn zyn_iadd_past32(a: i32, b: i32, site: i32) -> i32 {
    let r = bitcast<i32>(bitcast<u32>(a) + bitcast<u32>(b));
    if ((r < a) != (b < 0i)) { zyn_fail(site, 0i); } return r; }""",
    "zyn_isub_past32": """\
fn zyn_isub_past32(a: i32, b: i32, site: i32) -> i32 {
    let r = bitcast<i32>(bitcast<u32>(a) - bitcast<u32>(b));
    if ((r > a) != (b < 0i)) { zyn_fail(site, 0i); } return r; }""",
    "zyn_imul_past32": """\
fn zyn_imul_past32(a: i32, b: i32, site: i32) -> i32 {
    let r = bitcast<i32>(bitcast<u32>(a) * bitcast<u32>(b));
    let past = select(a != 0i && zyn_tdiv(r, a) != b, b == i32(-2147483647 - 1), a == -1i);
    if (past) { zyn_fail(site, 0i); } return r; }""",
    # (by squaring: a square past 32 bits is one the power passes too, as its base is not 0)
    "zyn_ipow_past32": _pow_past32("i"),
    "zyn_uadd_past32": """\
// u64 arithmetic held in 32 bits: a value past them (or below 0) fails the site
fn zyn_uadd_past32(a: u32, b: u32, site: i32) -> u32 {
    let r = a + b;
    if (r < a) { zyn_fail(site, 0i); } return r; }""",
    "zyn_usub_past32": """\
fn zyn_usub_past32(a: u32, b: u32, site: i32) -> u32 {
    if (b > a) { zyn_fail(site, 0i); } return a - b; }""",
    "zyn_umul_past32": """\
fn zyn_umul_past32(a: u32, b: u32, site: i32) -> u32 {
    let r = a * b;
    if (a != 0u && r / a != b) { zyn_fail(site, 0i); } return r; }""",
    "zyn_upow_past32": _pow_past32("u"),
    "zyn_isnan_f32": """\
// on the bits: a shader compiler may assume x == x
fn zyn_isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }""",
    "zyn_isnan_f64": """\
// x != x is an ordered comparison on some backends (false for NaN): test the bits of the
// f32 it converts to (NaN stays NaN, a large value becomes an infinity)
fn zyn_isnan_f64(x: f64) -> bool { return zyn_isnan_f32(f32(x)); }""",
    "zyn_tanh_f32": """\
fn zyn_tanh_f32(x: f32) -> f32 {
    // tanh saturates to +-1 well before |x| = 15; clamping keeps exp() finite (a NaN is
    // returned as it is: clamp may not keep it)
    if (zyn_isnan_f32(x)) { return x; }
    if (abs(x) < 0.625f) {
        // near 0 the builtin (a quotient of exponentials) keeps only the absolute error:
        // tanh(1e-4) was off by 2e-4 of itself; Cephes' tanhf polynomial keeps the digits
        // (but -0 + 0, +0: a zero is returned as it is)
        let z = x * x;
        return select(x + x * z * ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z
            - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z - 3.33332819422e-1f), x,
            x == 0.0f);
    }
    return tanh(clamp(x, -15.0f, 15.0f)); }""",
    "zyn_sinh_f32": """\
fn zyn_sinh_f32(x: f32) -> f32 {
    if (abs(x) < 1.0f) {
        // the builtin, (exp(x) - exp(-x)) / 2, loses the digits of small values (Cephes'
        // sinhf polynomial keeps them)
        let z = x * x;
        return x + x * z * ((2.03721912945e-4f * z + 8.33028376239e-3f) * z
            + 1.66667160211e-1f);
    }
    if (abs(x) > 9.0f) {
        // the builtin's exp(x) is infinite past 88.7 where sinh is not (89.0 gives
        // 2.24e38): exp(|x| / 2) times its half, finite factors (zyn_half_f32)
        let e = zyn_exp_f32(abs(x) * 0.5f);
        return select(-e, e, x > 0.0f) * zyn_half_f32(e);
    }
    // (e - 1 / e) / 2 of zyn_exp_f32 (llvmpipe's builtin was 8 ulp off near 7.6)
    let e = zyn_exp_f32(abs(x));
    let s = (e - 1.0f / e) * 0.5f;
    return select(-s, s, x > 0.0f); }""",
    # half of a normal x > 1 by its exponent's bits: a compiler reassociated e * (0.5 * e)
    # into (e * e) * 0.5, infinite past 88.7 (NVIDIA's Vulkan driver: cosh(89.0) was inf)
    "zyn_half_f32": "fn zyn_half_f32(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) - 0x00800000u); }",
    "zyn_cosh_f32": """\
fn zyn_cosh_f32(x: f32) -> f32 {
    // as sinh: finite up to 89.4, where exp(x) of the builtin is infinite past 88.7
    if (abs(x) > 9.0f) { let e = zyn_exp_f32(abs(x) * 0.5f); return e * zyn_half_f32(e); }
    let e = zyn_exp_f32(abs(x));    // as sinh: the builtin was 8 ulp off near 7.6
    return (e + 1.0f / e) * 0.5f; }""",
    "zyn_log_f32": """\
fn zyn_log_f32(x: f32) -> f32 {
    // near 1 the builtin keeps only an absolute error (log(0.9999767) was off by 2.5e-3 of
    // itself, and llvmpipe's is 14 ulp off from 0.8 to 0.94): there log(1 + u) =
    // 2 atanh(u / (2 + u)), u = x - 1 exact
    let u = x - 1.0f;
    if (u > -0.3f && u < 0.0625f) {
        let s = u / (2.0f + u);
        let z = s * s;
        return 2.0f * s * (1.0f + z * (0.33333333333f + z * (0.2f + z * (0.14285714286f
            + z * 0.11111111111f))));
    }
    // a subnormal x read as a normal one by the builtin (llvmpipe's log(1e-40) was -88.02,
    // not -92.10): scaled by 2^24 into the normals, 24 ln 2 taken off
    if (x > 0.0f && x < 1.17549435e-38f) { return log(x * 16777216.0f) - 16.6355323334f; }
    return log(x); }""",
    "zyn_log2_f32": """\
fn zyn_log2_f32(x: f32) -> f32 {
    if (x > 0.7f && x < 1.0625f) { return zyn_log_f32(x) * 1.44269504088896341f; }  // as log
    if (x > 0.0f && x < 1.17549435e-38f) { return log2(x * 16777216.0f) - 24.0f; }  // as log
    return log2(x); }""",
    "zyn_exp_f32": """\
fn zyn_exp_f32(x: f32) -> f32 {
    // the builtin's error grows with |x| (3 + 2 |x| ulp: exp(-79.3) was off by 3.7e-6 of
    // itself): Cody-Waite's reduction to |r| <= ln 2 / 2, Cephes' expf polynomial, 2^n
    if (!(x > -104.0f && x < 88.8f)) { return exp(x); }  // NaN, infinities, 0 and inf
    let n = floor(x * 1.44269504088896341f + 0.5f);
    let r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
    let y = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r
        + 4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f) * r * r + r + 1.0f;
    // times 2^n by adding n to y's exponent bits (y in [0.7, 1.42]: exact while the result
    // is normal, and no float product a driver could reorder or flush; two ldexp calls made
    // the WebGPU softmax on an H200 twice as slow); below (n from -150, a subnormal result,
    // which llvmpipe's builtin flushed to 0, as it did exp(-86.99)) as 2^-63 * 2^(n + 63)
    // (n = 128: 2^127, then times 2, overflowing as it should)
    let m = min(n, 127.0f);
    if (n >= -125.0f) { return bitcast<f32>(bitcast<i32>(y) + (i32(m) << 23u)) * select(1.0f, 2.0f, n > m); }
    return y * 1.0842021724855044e-19f * bitcast<f32>(u32(i32(n) + 190i) << 23u); }""",
    "zyn_exp2_f32": """\
// llvmpipe's builtin flushes subnormal results to 0 (exp2(-140) was 0, not 7.2e-43): those
// as 2^-64 * exp2(x + 64), x + 64 exact there
fn zyn_exp2_f32(x: f32) -> f32 {
    if (x < -126.0f) { return exp2(x + 64.0f) * 5.421010862427522e-20f; }
    return exp2(x); }""",
    "zyn_sigmoid_f32": "fn zyn_sigmoid_f32(x: f32) -> f32 { return 1.0f / (1.0f + zyn_exp_f32(-x)); }",
    "zyn_silu_f32": "fn zyn_silu_f32(x: f32) -> f32 { return x / (1.0f + zyn_exp_f32(-x)); }",
    "zyn_erf_f32": """\
fn zyn_erf_f32(x: f32) -> f32 {
    // Abramowitz & Stegun 7.1.26 refined: |error| < 1.5e-7, which near 0 is most of the
    // value (erf(1e-4) was off by 1e-3 of itself): there the Taylor series
    let a = abs(x);
    if (a < 0.5f) {
        let z = x * x;
        return x * (1.1283791671f + z * (-0.3761263890f + z * (0.1128379167f
            + z * (-0.0268661707f + z * (0.0052239776f - z * 0.0008548327f)))));
    }
    let t = 1.0f / (1.0f + 0.3275911f * a);
    let y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t
        - 0.284496736f) * t + 0.254829592f) * t * zyn_exp_f32(-a * a);
    return sign(x) * y; }""",
    "zyn_erfc_f32": """\
fn zyn_erfc_f32(x: f32, lo: f32, s: f32) -> f32 {
    // s erfc(x + lo), lo x's low part: relative error about 1e-7 (Numerical Recipes' erfcc;
    // exp(-x * x) split at x's multiple of 1/16 below it, whose square is exact, and
    // -2 x lo, so a large x keeps its digits); s goes on before the last factor, so a
    // result above 2^-126 never passes through a subnormal, which a driver may flush to 0
    let a = abs(x);
    if (a >= 10.0f) { return select(2.0f, 0.0f, x > 0.0f) * s; }
    let t = 1.0f / (1.0f + 0.5f * a);
    let h = floor(a * 16.0f) * 0.0625f;
    // (zyn_exp_f32: llvmpipe's builtin flushed a subnormal exp(-h * h) to 0)
    let y = s * t * zyn_exp_f32(-h * h) * zyn_exp_f32((h - a) * (h + a) - 2.0f * x * lo - 1.26551223f + t * (1.00002368f
        + t * (0.37409196f + t * (0.09678418f + t * (-0.18628806f + t * (0.27886807f
        + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f)))))))));
    return select(2.0f * s - y, y, x >= 0.0f); }""",
    # through erfc: 1 + erf(x / sqrt(2)) cancels for a negative x (gelu(-6) kept no digit);
    # x / sqrt(2) in two parts: its rounding, times erfc's slope 2 |x|, was 160 ulp at -13
    "zyn_gelu_f32": """\
fn zyn_gelu_f32(x: f32) -> f32 {
    let a = zyn_ddmul_f32(vec2<f32>(x, 0.0f), vec2<f32>(-0.70710677f, -1.21016175e-08f));
    return zyn_erfc_f32(a.x, a.y, 0.5f * x); }""",
    "zyn_ddmul_f32": """\
// double-f32 (hi, lo) products, exact to 2^-44 or so
fn zyn_split_f32(v: f32) -> vec2<f32> {
    // v's leading 12 bits and the rest, exactly, from the bits (no fma, which WGSL may leave
    // unfused, nor Dekker's c - (c - v), which a shader compiler may fold to v)
    let h = bitcast<f32>(bitcast<u32>(v) & 0xfffff000u);
    return vec2<f32>(h, v - h); }
fn zyn_ddmul_f32(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let p = zyn_hide_f32(a.x * b.x);
    let x = zyn_split_f32(a.x);
    let y = zyn_split_f32(b.x);
    let e = (zyn_hide_f32(x.x * y.x - p) + x.x * y.y + x.y * y.x) + x.y * y.y;   // a.x * b.x - p
    let lo = e + (a.x * b.y + a.y * b.x);
    // renormalised (else lo doubles against p with each square); an infinite p's lo is NaN
    let s = select(zyn_hide_f32(p + lo), p, zyn_isnan_f32(lo));
    return vec2<f32>(s, lo - zyn_hide_f32(s - p)); }""",
    "zyn_powi_f32": """\
// a^n of a whole n (|n| < 2^24, a > 0 finite) by squaring in double-f32, values (hi + lo) *
// 2^e with hi in [1, 2): each product exact to 2^-44 or so, so the result rounds once, as
// numpy's (C's) powf (the logarithm's rounding times n left 7^11 and 3^20 3 and 4 ulp off)
// x (hi in [1/8, 8)) as (hi, lo) * 2^z, hi in [1, 2): (hi, lo, z)
fn zyn_ddnorm_f32(x: vec2<f32>) -> vec3<f32> {
    let z = i32(bitcast<u32>(x.x) >> 23u) - 127i;
    let s = bitcast<f32>(u32(127i - z) << 23u);
    return vec3<f32>(x.x * s, x.y * s, f32(z)); }
fn zyn_powi_f32(a: f32, n: i32) -> f32 {
    let sub = a < 1.17549435e-38f;
    let u = bitcast<u32>(select(a, a * 16777216.0f, sub));
    var pz = f32(i32(u >> 23u) - 127i) - select(0.0f, 24.0f, sub);
    var p = vec2<f32>(bitcast<f32>((u & 0x7fffffu) | 0x3f800000u), 0.0f);
    if (n < 0) {        // 1 / a: the residual 1 - hi * (1 / hi) is exact
        let q = 1.0f / p.x;
        let pq = zyn_ddmul_f32(p, vec2<f32>(q, 0.0f));
        p = vec2<f32>(q * 2.0f, q * 2.0f * (zyn_hide_f32(1.0f - pq.x) - pq.y));
        pz = -pz - 1.0f;
    }
    var r = vec3<f32>(1.0f, 0.0f, 0.0f);
    var k = u32(abs(n));
    for (var i = 0; i < 25; i++) {
        if ((k & 1u) != 0u) {
            let m = zyn_ddnorm_f32(zyn_ddmul_f32(r.xy, p));
            r = vec3<f32>(m.xy, m.z + r.z + pz);
        }
        k = k >> 1u;
        // past 2^+-300 with more factors to come: the power is inf or 0
        if (k == 0u || abs(r.z) > 300.0f || abs(pz) > 300.0f) { break; }
        let m = zyn_ddnorm_f32(zyn_ddmul_f32(p, p));
        p = m.xy;
        pz = m.z + pz * 2.0f;
    }
    let z = select(r.z, pz, k != 0u);
    if (abs(z) > 300.0f) { return select(0.0f, bitcast<f32>(0x7f800000u), z > 0.0f); }
    // 2^z in three normal factors, multiplied in after hi + lo, so that only the last rounds
    let z1 = floor(z / 3.0f);
    let z2 = floor((z - z1) * 0.5f);
    return (r.x + r.y) * zyn_pow2i_f32(z1) * zyn_pow2i_f32(z2) * zyn_pow2i_f32(z - z1 - z2); }""",
    "zyn_pow_f32": """\
fn zyn_pow_f32(a: f32, b: f32) -> f32 {
    // numpy's power (C's pow), where WGSL's pow is undefined: a^0 and 1^b are 1 (a NaN
    // too), a NaN otherwise NaN, 0 to a negative power infinity, a negative base with a
    // whole exponent defined (an odd one negative) and with another NaN
    if (b == 0.0f || a == 1.0f) { return 1.0f; }
    if (zyn_isnan_f32(a) || zyn_isnan_f32(b)) { return a + b; }
    if (a == 0.0f) {
        // -0 to an odd whole power keeps its sign (-0^-1 is -inf); a subnormal a that the
        // device flushes to 0 is a zero of its own sign
        let z = select(0.0f, bitcast<f32>(0x7f800000u), b < 0.0f);
        return select(z, -z, (bitcast<u32>(a) & 0x80000000u) != 0u && b == floor(b) && abs(b) < 16777216.0f && (i32(b) & 1i) == 1i); }
    // a whole power by products (3^4 was 81.000008, 10^-2 two ulps off by the logarithm)
    if (b == floor(b) && abs(b) < 16777216.0f && zyn_isfinite_f32(a)) {
        let r = zyn_powi_f32(abs(a), i32(b));
        return select(r, -r, a < 0.0f && (i32(b) & 1i) == 1i);
    }
    if (a < 0.0f) {
        if (b != floor(b)) {
            // -inf to a power that is not whole is inf or 0 (a finite base: NaN)
            let ninf = a == bitcast<f32>(0xff800000u);
            return select(bitcast<f32>(0x7fc00000u), select(0.0f, bitcast<f32>(0x7f800000u), b > 0.0f), ninf); }
        if (a == -1.0f && abs(b) == bitcast<f32>(0x7f800000u)) { return 1.0f; }
        let r = zyn_pow_pos_f32(-a, b);
        return select(r, -r, abs(b) < 16777216.0f && (i32(b) & 1i) == 1i);
    }
    return zyn_pow_pos_f32(a, b); }""",
    "zyn_pow_pos_f32": """\
// a^b of a > 0 as 2^i * exp(t): the builtin, exp2(b * log2(a)), and exp(b * log(a)) lose
// the digits of the product's rounding (0.0167^14.75 was 86 ulp off). With a = 2^e m
// (m from 1/sqrt 2 to sqrt 2, a subnormal a scaled into the normals) and b = bh + bl (bh
// b's leading 12 bits), e * bh is exact: its whole part i is kept apart, and t, the rest,
// is small, taken as th + tl in double-f32 (log m too: its f32 rounding times b left
// 0.696^-26.8 24 ulp off), exp(th) (1 + tl). Infinities and NaN by the builtin.
fn zyn_pow_pos_f32(a: f32, b: f32) -> f32 {
    if (!zyn_isfinite_f32(a) || !zyn_isfinite_f32(b)) { return pow(a, b); }
    let sub = a < 1.17549435e-38f;
    let u = bitcast<u32>(select(a, a * 16777216.0f, sub));
    var e = f32(i32(u >> 23u) - 127i) - select(0.0f, 24.0f, sub);
    var m = bitcast<f32>((u & 0x7fffffu) | 0x3f800000u);
    if (m > 1.41421356f) { m = m * 0.5f; e = e + 1.0f; }
    // log m = 2 atanh(s), s = f / (2 + f), f = m - 1 exact; s as sh + sl
    let f = m - 1.0f;
    let d = zyn_twosum_f32(2.0f, f);
    let sh = f / d.x;
    let q = zyn_ddmul_f32(vec2<f32>(sh, 0.0f), d);
    let sl = (zyn_hide_f32(f - q.x) - q.y) / d.x;
    let z = sh * sh;
    let tail = 2.0f * sh * z * (0.33333333333f + z * (0.2f + z * (0.14285714286f + z * (0.11111111111f
        + z * (0.09090909091f + z * 0.07692307692f)))));
    // t = (p - i + e bl) ln 2 + b log m, each product exact in two parts
    let bh = bitcast<f32>(bitcast<u32>(b) & 0xfffff000u);
    let p = e * bh;
    let i = round(p);
    let x = zyn_twosum_f32(p - i, e * (b - bh));      // each part exact
    let t1 = zyn_ddmul_f32(x, vec2<f32>(0.693147182f, -1.90465430e-09f));
    let t2 = zyn_ddmul_f32(vec2<f32>(b, 0.0f), vec2<f32>(2.0f * sh, 2.0f * sl + tail));
    let th = zyn_twosum_f32(t1.x, t2.x);
    let tl = th.y + t1.y + t2.y;
    let t = th.x;
    // exp(t)'s own power of 2, n, joins i (t may pass exp's range where a^b does not)
    let n = round(t * 1.44269504088896341f);
    let k = i + n;
    if (abs(k) > 300.0f) { return select(0.0f, bitcast<f32>(0x7f800000u), k > 0.0f); }
    let r = (t - n * 0.693359375f) + n * 2.12194440e-4f;
    // 2^k in three normal factors, multiplied in after exp(r), so that only the last rounds
    let k1 = floor(k / 3.0f);
    let k2 = floor((k - k1) * 0.5f);
    let y = zyn_exp_f32(r);
    return (y + y * tl) * zyn_pow2i_f32(k1) * zyn_pow2i_f32(k2) * zyn_pow2i_f32(k - k1 - k2); }""",
    "zyn_pow2i_f32": """\
fn zyn_pow2i_f32(k: f32) -> f32 { return bitcast<f32>(u32(i32(k) + 127i) << 23u); }""",
    "zyn_mulz_f32": """\
// x times a zero constant z from the bits (a shader compiler may fold x * 0 to 0): NaN for
// a NaN or infinite x, else a zero of the product's sign
fn zyn_mulz_f32(x: f32, z: f32) -> f32 {
    if (!zyn_isfinite_f32(x)) { return bitcast<f32>(0x7fc00000u); }
    return bitcast<f32>((bitcast<u32>(x) ^ bitcast<u32>(z)) & 0x80000000u); }""",
    "zyn_addz_f32": """\
// x + 0.0, a zero's sign from the bits (a shader compiler may fold x + 0.0 to x): 0.0 for a
// zero x, as -0.0 + 0.0 is
fn zyn_addz_f32(x: f32) -> f32 { return select(x, 0.0f, (bitcast<u32>(x) << 1u) == 0u); }""",
    "zyn_addz_f64": """\
fn zyn_addz_f64(x: f64) -> f64 { return select(x, f64(0.0), x == f64(0.0)); }""",
    "zyn_zdiv_f32": """\
// a zero constant z over x from the bits (a shader compiler may fold 0 / x to 0): NaN for
// a NaN or zero x, else a zero of the quotient's sign
fn zyn_zdiv_f32(z: f32, x: f32) -> f32 {
    let m = bitcast<u32>(x) & 0x7fffffffu;
    if (m > 0x7f800000u || m == 0u) { return bitcast<f32>(0x7fc00000u); }
    return bitcast<f32>((bitcast<u32>(x) ^ bitcast<u32>(z)) & 0x80000000u); }""",
    "zyn_mulz_f64": """\
// zyn_mulz_f32 for f64, which WGSL cannot bitcast: an f64 scaled by 2^-1000 converts to a
// finite f32 where it is finite (keeping its sign, a zero's too), else to an infinity or NaN
fn zyn_mulz_f64(x: f64, z: f64) -> f64 {
    let s = f32(x * 9.332636185032189e-302);
    if (!zyn_isfinite_f32(s)) { return f64(bitcast<f32>(0x7fc00000u)); }
    return f64(bitcast<f32>((bitcast<u32>(s) ^ bitcast<u32>(f32(z))) & 0x80000000u)); }""",
    "zyn_zdiv_f64": """\
// zyn_zdiv_f32 for f64, through the f32 of x scaled as zyn_mulz_f64's (a zero stays zero)
fn zyn_zdiv_f64(z: f64, x: f64) -> f64 {
    let s = f32(x * 9.332636185032189e-302);
    if (zyn_isnan_f32(s) || x == f64(0.0)) { return f64(bitcast<f32>(0x7fc00000u)); }
    return f64(bitcast<f32>((bitcast<u32>(s) ^ bitcast<u32>(f32(z))) & 0x80000000u)); }""",
    "zyn_mul32": """\
// the 64-bit product of two u32s as (low word, high word), from 16-bit halves
fn zyn_mul32(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
    let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u),
                     a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u)); }""",
    "zyn_bits_from": """\
// the 32 bits from bit s (from the top) of a on, b's after them
fn zyn_bits_from(a: u32, b: u32, s: u32) -> u32 {
    return select((a << s) | (b >> (32u - s)), a, s == 0u); }""",
    "zyn_reduce_pio2": """\
// a finite f32 ax >= 2^-7 as (4k + q + r / (pi/2)) * pi/2, r in [-pi/4, pi/4], by Payne
// and Hanek's reduction: its 24-bit mantissa times the 96 bits of 2/pi that give the two
// lowest integer bits and 64 fractional bits of the product (a shader's sin and cos reduce
// in f32: llvmpipe's lost every digit from about 1.3e7 on)
struct ZynReduced { r: f32, q: u32 }
fn zyn_reduce_pio2(ax: f32) -> ZynReduced {
    // 2/pi in 32-bit words, after a zero word: bit s of it on, s = exponent - 150 + 32 - 2
    var w = array<u32, 8>(0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u,
                          0xdb629599u, 0x3c439041u, 0xfe5163abu);
    let bits = bitcast<u32>(ax);
    let m = (bits & 0x7fffffu) | 0x800000u;
    let s = ((bits >> 23u) & 0xffu) - 120u;
    let j = s >> 5u;
    let b = s & 31u;
    let p0 = zyn_mul32(m, zyn_bits_from(w[j], w[j + 1u], b));
    let p1 = zyn_mul32(m, zyn_bits_from(w[j + 1u], w[j + 2u], b));
    let p2 = zyn_mul32(m, zyn_bits_from(w[j + 2u], w[j + 3u], b));
    // the product's low 96 bits (what lies above them is a multiple of 4); its binary
    // point below bit 94
    let r1 = p2.y + p1.x;
    let r2 = p1.y + p0.x + select(0u, 1u, r1 < p2.y);
    var q = r2 >> 30u;
    var hi = (r2 << 2u) | (r1 >> 30u);
    var lo = (r1 << 2u) | (p2.x >> 30u);
    var sign = 1.0f;
    if (hi >= 0x80000000u) {        // past half a quadrant: the next quadrant, less
        q = (q + 1u) & 3u;
        hi = ~hi + select(0u, 1u, lo == 0u);
        lo = 0u - lo;
        sign = -1.0f;
    }
    let f = (f32(hi) + f32(lo) * 2.3283064e-10f) * 2.3283064e-10f;
    return ZynReduced(sign * f * 1.5707964f, q); }""",
    # sin, cos and tan by Cephes' sinf, cosf and tanf polynomials on [-pi/4, pi/4], past it
    # on the argument reduced by zyn_reduce_pio2: the same digits on every adapter (NVIDIA's
    # Vulkan driver reduced in f32 and was off by 0.1 from 2^14 on; llvmpipe's from 1.3e7)
    "zyn_sin_poly": """\
fn zyn_sin_poly(r: f32) -> f32 {
    let z = r * r;
    return ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r + r; }
fn zyn_cos_poly(r: f32) -> f32 {
    let z = r * r;
    return ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z
        - 0.5f * z + 1.0f; }""",
    "zyn_sin_f32": """\
fn zyn_sin_f32(x: f32) -> f32 {
    if (!zyn_isfinite_f32(x)) { return sin(x); }
    // a zero is itself: the polynomial's x + (...) * x gave +0 for -0
    if (abs(x) <= 0.7853982f) { return select(zyn_sin_poly(x), x, x == 0.0f); }
    let a = zyn_reduce_pio2(abs(x));
    let v = select(zyn_sin_poly(a.r), zyn_cos_poly(a.r), (a.q & 1u) == 1u);
    return select(v, -v, (a.q >= 2u) != (x < 0.0f)); }""",
    "zyn_cos_f32": """\
fn zyn_cos_f32(x: f32) -> f32 {
    if (!zyn_isfinite_f32(x)) { return cos(x); }
    if (abs(x) <= 0.7853982f) { return zyn_cos_poly(x); }
    let a = zyn_reduce_pio2(abs(x));
    let v = select(zyn_cos_poly(a.r), zyn_sin_poly(a.r), (a.q & 1u) == 1u);
    return select(v, -v, a.q == 1u || a.q == 2u); }""",
    "zyn_tan_f32": """\
fn zyn_tan_poly(r: f32) -> f32 {
    let z = r * r;
    return (((((9.38540185543e-3f * z + 3.11992232697e-3f) * z + 2.44301354525e-2f) * z
        + 5.34112807005e-2f) * z + 1.33387994085e-1f) * z + 3.33331568548e-1f) * z * r + r; }
fn zyn_tan_f32(x: f32) -> f32 {
    if (!zyn_isfinite_f32(x)) { return tan(x); }
    if (abs(x) <= 0.7853982f) { return zyn_tan_poly(x); }
    let a = zyn_reduce_pio2(abs(x));
    let t = zyn_tan_poly(a.r);
    let v = select(t, -1.0f / t, (a.q & 1u) == 1u);
    return select(v, -v, x < 0.0f); }""",
    "zyn_isfinite_f32": """\
fn zyn_isfinite_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) < 0x7f800000u; }""",
    "zyn_f16": """\
// f32 rounded to the nearest f16 (f16 held in f32 where the adapter has no `shader-f16`);
// past f16's range an infinity, where WGSL leaves the conversion undefined
fn zyn_f16(x: f32) -> f32 {
    if (abs(x) >= 65520.0f) { return select(bitcast<f32>(0xff800000u), bitcast<f32>(0x7f800000u), x > 0.0f); }
    // between the largest f16 and the overflow tie, the largest (NVIDIA's quantizeToF16 gives
    // an infinity past 65504, which WGSL leaves undefined)
    if (abs(x) > 65504.0f) { return select(-65504.0f, 65504.0f, x > 0.0f); }
    // below f16's smallest normal the multiples of 2^-24 (ties to even): quantizeToF16 may
    // flush these subnormals to zero (WGSL allows it; llvmpipe does)
    if (abs(x) < 0.00006103515625f) { return round(x * 16777216.0f) * 0.000000059604644775390625f; }
    return quantizeToF16(x); }""",
    "zyn_f32_odd": """\
// f64 to f32 rounded to odd (an inexact result's last bit set): rounded again to f16 it
// is x's nearest, where two roundings to nearest are not (1 + 2^-11 + 2^-40 went
// to 1 + 2^-11, a tie, then to 1: numpy's f16 is 1 + 2^-10). Past f32 an infinity.
fn zyn_f32_odd(x: f64) -> f32 {
    if (abs(x) > f64(3.4028234663852886e38)) { return select(bitcast<f32>(0xff800000u), bitcast<f32>(0x7f800000u), x > f64(0.0)); }
    let f = f32(x);
    let u = bitcast<u32>(f);
    let back = zyn_hide_f64(f64(f));        // (a driver may take f64(f32(x)) for x)
    if (zyn_isnan_f32(f) || (u & 1u) == 1u || back == x) { return f; }
    return bitcast<f32>(select(u + 1u, u - 1u, abs(back) > abs(x))); }""",
    "zyn_bf16": """\
// f32 rounded to the nearest bfloat16 (ties to even), held in an f32
fn zyn_bf16(x: f32) -> f32 {
    let u = bitcast<u32>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) { return x; }
    return bitcast<f32>((u + 0x7fffu + ((u >> 16u) & 1u)) & 0xffff0000u); }""",
}


# x, behind a select no shader compiler can decide (x's bits, an f64's those of its f32, are
# those of one NaN, whose double is NaN too). SPIR-V without NoContraction (naga writes none)
# lets a driver reassociate and fuse float operations, and NVIDIA's did: s - (s - a) to a,
# (x - y) - z to x - (y + z), a two-part product's leading part fused into a later sum (its
# error counted twice). Each step of an error-free transform whose rounding matters passes
# through it: f64 log in two parts had been only as exact as in one, f64 pow 442 ulp off and
# f32 pow 7. (A uniform factor of 1 did not do: llvmpipe factored it out.) And a + b with its
# rounding error, Knuth's, each step hidden
for _t, _bits in (("f32", "x"), ("f64", "f32(x)")):
    _FIXED[f"zyn_hide_{_t}"] = (f"fn zyn_hide_{_t}(x: {_t}) -> {_t} {{ return select(x, x * 2.0, "
                                f"bitcast<u32>({_bits}) == 0xffffffffu); }}")
    _FIXED[f"zyn_twosum_{_t}"] = f"""\
fn zyn_twosum_{_t}(a: {_t}, b: {_t}) -> vec2<{_t}> {{
    let s = zyn_hide_{_t}(a + b);
    let bb = zyn_hide_{_t}(s - a);
    return vec2<{_t}>(s, zyn_hide_{_t}(a - zyn_hide_{_t}(s - bb)) + zyn_hide_{_t}(b - bb)); }}"""


# f64 math (GLSL.std.450 has no 64-bit exp, log or tanh): fdlibm's exp and log, within an
# ulp or two of numpy's; exp2, log2, tanh, sigmoid, silu, sinh and cosh built on them
_STEPS = "".join(
    f"    if (m >= {2.0 ** s!r}) {{ m = ldexp(m, -{s}i); k += {s}i; }}\n"
    f"    if (m < {2.0 ** -s!r}) {{ m = ldexp(m, {s}i); k -= {s}i; }}\n" for s in (512, 256, 128, 64))
_TANH_P = """(((((((((-1.724229434740653e-05 * z + 7.959476025492855e-05) * z +
            -0.00023077238182345804) * z + 0.0005874356408905726) * z + -0.0014553088663318695)
            * z + 0.003592058907770886) * z + -0.008863229824094) * z + 0.021869488260176276) *
            z + -0.053968253961384736) * z + 0.13333333333326647) * z + -0.3333333333333332"""
_INF64, _NAN64 = "f64(bitcast<f32>(0x7f800000u))", "f64(bitcast<f32>(0x7fc00000u))"
_FIXED["zyn_exp_f64"] = f"""\
// exp(x + l) 2^s, l a part below x's last digit (pow's product in two parts), s a scale
// that keeps a subnormal factor's digits (gelu's): x = k ln 2 + r, |r| <= ln 2 / 2 (ln 2 in
// two parts, k ln 2's first exact), exp(r) by a rational of r, times 2^(k + s) by ldexp (a
// subnormal result rounded once)
fn zyn_expl_f64(x: f64, l: f64, s: i32) -> f64 {{
    if (!(abs(x) < 746.0)) {{ return select(select({_INF64}, 0.0, x < 0.0), x, zyn_isnan_f64(x)); }}
    let k = round(x * 1.4426950408889634);
    let hi = x - k * 6.93147180369123816490e-01;
    let lo = k * 1.90821492927058770002e-10 - l;
    let r = hi - lo;
    let t = r * r;
    let c = r - t * (1.66666666666666019037e-01 + t * (-2.77777777770155933842e-03 + t * (
        6.61375632143793436117e-05 + t * (-1.65339022054652515390e-06 + t * 4.13813679705723846039e-08))));
    return ldexp(1.0 - zyn_hide_f64(zyn_hide_f64(lo - (r * c) / (2.0 - c)) - hi), i32(k) + s); }}
fn zyn_exp_f64(x: f64) -> f64 {{ return zyn_expl_f64(x, 0.0, 0i); }}"""
_FIXED["zyn_exp2_f64"] = """\
fn zyn_exp2_f64(x: f64) -> f64 {
    if (!(abs(x) < 1080.0)) { return zyn_exp_f64(x); }     // NaN, 0 or an infinity
    let k = round(x);
    return ldexp(zyn_exp_f64((x - k) * 0.6931471805599453), i32(k)); }"""
_FIXED["zyn_frexp_f64"] = f"""\
// a finite x > 0 as (m, e), x = m 2^e, m in [1, 2): e read from an f32's exponent bits (WGSL
// has no 64-bit bitcast; naga refuses frexp's i64 exponent), x first brought into f32's
// range by powers of 2
fn zyn_frexp_f64(x: f64) -> vec2<f64> {{
    var k = 0i; var m = x;
{_STEPS}    let e = i32((bitcast<u32>(f32(m)) >> 23u) & 0xffu) - 127i;
    m = ldexp(m, -e); k += e;
    if (m >= 2.0) {{ m = m * 0.5; k += 1i; }}
    if (m < 1.0) {{ m = m * 2.0; k -= 1i; }}
    return vec2<f64>(m, f64(k)); }}"""
_FIXED["zyn_log_parts_f64"] = f"""\
// log(x) as (k, log(m)), x = m 2^k, m in [sqrt(1/2), sqrt(2))
fn zyn_log_parts_f64(x: f64) -> vec2<f64> {{
    if (!(x > 0.0 && x <= 1.7976931348623157e308) || zyn_isnan_f64(x)) {{
        return vec2<f64>(0.0, select(select({_NAN64}, -{_INF64}, x == 0.0), x, x > 0.0 || zyn_isnan_f64(x)));
    }}
    let fe = zyn_frexp_f64(x);
    var m = fe.x; var k = i32(fe.y);
    if (m > 1.4142135623730951) {{ m = m * 0.5; k += 1i; }}
    // log(1 + f) = 2 atanh(s), s = f / (2 + f), fdlibm's rational
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let r = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01 + w * (1.818357216161805012e-01
        + w * 1.479819860511658591e-01))) + w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01
        + w * 1.531383769920937332e-01));
    let hfsq = 0.5 * f * f;
    return vec2<f64>(f64(k), f - (hfsq - s * (hfsq + r))); }}"""
_FIXED["zyn_log_f64"] = """\
fn zyn_log_f64(x: f64) -> f64 {
    let p = zyn_log_parts_f64(x);
    return p.x * 6.93147180369123816490e-01 + (p.y + p.x * 1.90821492927058770002e-10); }"""
_FIXED["zyn_log2_f64"] = """\
fn zyn_log2_f64(x: f64) -> f64 { let p = zyn_log_parts_f64(x); return p.x + p.y * 1.4426950408889634; }"""
_FIXED["zyn_tanh_f64"] = f"""\
fn zyn_tanh_f64(x: f64) -> f64 {{
    if (abs(x) < 0.625) {{       // x + x z P(z), z = x^2: a Chebyshev fit (a zero is itself)
        let z = x * x;
        return select(x + x * z * ({_TANH_P}), x, x == 0.0);
    }}
    let t = 1.0 - 2.0 / (zyn_exp_f64(abs(x) * 2.0) + 1.0);
    return select(t, -t, x < 0.0); }}"""
_FIXED["zyn_sigmoid_f64"] = "fn zyn_sigmoid_f64(x: f64) -> f64 { return 1.0 / (1.0 + zyn_exp_f64(-x)); }"
_FIXED["zyn_silu_f64"] = "fn zyn_silu_f64(x: f64) -> f64 { return x / (1.0 + zyn_exp_f64(-x)); }"
_FIXED["zyn_sinh_f64"] = """\
fn zyn_sinh_f64(x: f64) -> f64 {
    let a = abs(x);
    if (a <= 1.0) {     // Cephes' sinh rational: (e - 1 / e) / 2 cancels (a zero is itself)
        let z = x * x;
        return select(x + x * z * (((-7.89474443963537015605e-1 * z - 1.63725857525983828727e2) * z
            - 1.15614435765005216044e4) * z - 3.51754964808151394800e5) / (((z - 2.77711081420602794433e2) * z
            + 3.61578279834431989373e4) * z - 2.11052978884890840399e6), x, x == 0.0);
    }
    // past 20, exp(a / 2) times its half: finite up to 710.4, where exp(a) is infinite past 709.8
    let e = zyn_exp_f64(select(a, a * 0.5, a > 20.0));
    let v = select((e - 1.0 / e) * 0.5, ldexp(e, -1) * e, a > 20.0);
    return select(v, -v, x < 0.0); }"""
_FIXED["zyn_cosh_f64"] = """\
fn zyn_cosh_f64(x: f64) -> f64 {
    let a = abs(x);         // as sinh past 20
    let e = zyn_exp_f64(select(a, a * 0.5, a > 20.0));
    return select((e + 1.0 / e) * 0.5, ldexp(e, -1) * e, a > 20.0); }"""


# f64 trigonometry, erf and pow (GLSL.std.450 has none in 64 bits). Products exact in two
# parts split each factor at an f32's bits (WGSL has no 64-bit bitcast, and a shader compiler
# may fold Dekker's c - (c - v) to v); the sums and products whose rounding errors are taken
# pass through zyn_hide_f64
def _horner(z: str, coeffs) -> str:
    """c0 + z * (c1 + z * (...)) of the coefficients, lowest first."""
    return "".join(f"{c!r} + {z} * (" for c in coeffs[:-1]) + repr(coeffs[-1]) + ")" * (len(coeffs) - 1)


def _pi_words(n: int) -> list:
    """The first n 32-bit words of 2/pi's fraction, from pi by Machin's formula in integers."""
    bits = 32 * n + 96
    one = 1 << bits

    def atan_inv(k):
        total, term, i, sign = 0, one // k, 1, 1
        while term:
            total, term, i, sign = total + sign * (term // i), term // (k * k), i + 2, -sign
        return total
    v = (1 << (32 * n + 1 + bits)) // (16 * atan_inv(5) - 4 * atan_inv(239))
    return [(v >> (32 * (n - 1 - i))) & 0xffffffff for i in range(n)]


def _log_table() -> tuple:
    """log(j / 32), j = 23..45, each as an f64 and the f64 of its remainder."""
    import decimal
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        logs = [(decimal.Decimal(j) / 32).ln() for j in range(23, 46)]
        hi = [float(v) for v in logs]
        return hi, [float(v - decimal.Decimal(h)) for v, h in zip(logs, hi)]


_LOG_HI, _LOG_LO = _log_table()
_FIXED["zyn_twoprod_f64"] = """\
// v as h + l, h v's f32 with its last bit off (23 bits: h h, h l exact), l exact (30 bits)
fn zyn_split_f64(v: f64) -> vec2<f64> {
    let h = f64(bitcast<f32>(bitcast<u32>(f32(v)) & 0xfffffffeu));
    return vec2<f64>(h, v - h); }
// a * b as p + e (|a|, |b| within f32's normal range, or the product not needed exactly)
fn zyn_twoprod_f64(a: f64, b: f64) -> vec2<f64> {
    let p = zyn_hide_f64(a * b);
    let x = zyn_split_f64(a);
    let y = zyn_split_f64(b);
    return vec2<f64>(p, (zyn_hide_f64(x.x * y.x - p) + x.x * y.y + x.y * y.x) + x.y * y.y); }"""
# |x| <= pi/4 as it is; past it Payne and Hanek's reduction in integers, as zyn_reduce_pio2's,
# for every finite x: x = M 2^E (M 53 bits, two words) times 192 bits of 2/pi from bit E - 2
# on (those before give multiples of 4), the fraction's 128 bits carried in f64 digits
_FIXED["zyn_reduce_pio2_f64"] = f"""\
// a finite ax > pi/4 as (4k + q + (h + l) / (pi/2)) pi/2, h + l in [-pi/4, pi/4]
struct ZynReduced64 {{ h: f64, l: f64, q: u32 }}
fn zyn_reduce_pio2_f64(ax: f64) -> ZynReduced64 {{
    // 2/pi in 32-bit words after two zero words
    var w = array<u32, 40>(0u, 0u, {", ".join(f"0x{v:08x}u" for v in _pi_words(38))});
    let fe = zyn_frexp_f64(ax);
    let m = ldexp(fe.x, 52i);
    let mh = floor(m * 2.3283064365386963e-10);
    let ml = u32(m - mh * 4294967296.0);
    let t = u32(i32(fe.y) + 10i);       // (E - 2) + 64, E = e - 52
    let j = t >> 5u;
    let b = t & 31u;
    var g: array<u32, 6>;
    for (var i = 0u; i < 6u; i++) {{ g[i] = zyn_bits_from(w[j + i], w[j + i + 1u], b); }}
    // digit k (weight 2^-32k) of M g: u32(mh) g[k] low and g[k + 1] high, ml g[k - 1] low
    // and g[k] high; carried from the last
    var d: array<u32, 5>;
    var carry: f64 = 0.0;
    for (var k = 5; k >= 1; k--) {{
        var s = carry + f64(zyn_mul32(u32(mh), g[k]).x) + f64(zyn_mul32(ml, g[k - 1]).x)
            + f64(zyn_mul32(ml, g[k]).y);
        if (k < 5) {{ s += f64(zyn_mul32(u32(mh), g[k + 1]).y); }}
        carry = floor(s * 2.3283064365386963e-10);
        d[k - 1] = u32(s - carry * 4294967296.0);
    }}
    var q = d[0] >> 30u;
    var n = vec4<u32>(d[0] & 0x3fffffffu, d[1], d[2], d[3]);
    var sign: f64 = 1.0;
    if (n.x >= 0x20000000u) {{       // past half a quadrant: the next one, less
        q = (q + 1u) & 3u;
        n = vec4<u32>(~n.x & 0x3fffffffu, ~n.y, ~n.z, ~n.w);
        sign = -1.0;
    }}
    // the fraction F = n / 2^126, normalised (x near a multiple of pi/2 starts with zeros)
    var z = 0i;
    for (var i = 0; i < 3 && n.x == 0u; i++) {{ n = vec4<u32>(n.yzw, 0u); z += 32i; }}
    let c = countLeadingZeros(n.x);
    let hi = zyn_bits_from(n.x, n.y, c);
    let mid = zyn_bits_from(n.y, n.z, c);
    let lo = zyn_bits_from(n.z, n.w, c);
    z += i32(c);
    let fh = ldexp(f64(hi) * 4294967296.0 + f64(mid & 0xfffff800u), -62i - z);
    let fl = ldexp(f64(mid & 0x7ffu) * 4294967296.0 + f64(lo), -94i - z);
    // times pi/2 in two parts
    let p = zyn_twoprod_f64(fh, 1.5707963267948966);
    let e = p.y + (fh * 6.123233995736766e-17 + fl * 1.5707963267948966);
    let r = zyn_hide_f64(p.x + e);
    return ZynReduced64(sign * r, sign * (e - zyn_hide_f64(r - p.x)), q); }}"""
# fdlibm's kernels: sin(x + y) and cos(x + y) for |x| <= pi/4, y below x's last digit
_FIXED["zyn_trig_k_f64"] = f"""\
fn zyn_sin_k_f64(x: f64, y: f64) -> f64 {{
    let z = x * x;
    let v = z * x;
    let r = {_horner("z", [8.33333333332248946124e-03, -1.98412698298579493134e-04,
                          2.75573137070700676789e-06, -2.50507602534068634195e-08,
                          1.58969099521155010221e-10])};
    return x - ((z * (0.5 * y - v * r) - y) - v * -1.66666666666666324348e-01); }}
fn zyn_cos_k_f64(x: f64, y: f64) -> f64 {{
    let z = x * x;
    let r = z * ({_horner("z", [4.16666666666666019037e-02, -1.38888888888741095749e-03,
                               2.48015872894767294178e-05, -2.75573143513906633035e-07,
                               2.08757232129817482790e-09, -1.13596475577881948265e-11])});
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    return w + (((1.0 - w) - hz) + (z * r - x * y)); }}"""
_TRIG_HEAD = """\
    let a = abs(x);
    if (!(a <= 1.7976931348623157e308) || zyn_isnan_f64(x)) { return %s; }
    var h = x; var l: f64 = 0.0; var q = 0u;
    if (a > 0.7853981633974483) {      // -x: the quadrant -q, the rest -(h + l)
        let r = zyn_reduce_pio2_f64(a);
        h = select(r.h, -r.h, x < 0.0); l = select(r.l, -r.l, x < 0.0);
        q = select(r.q, (4u - r.q) & 3u, x < 0.0);
    }
""" % _NAN64
_FIXED["zyn_sin_f64"] = f"""\
fn zyn_sin_f64(x: f64) -> f64 {{
{_TRIG_HEAD}    let v = select(zyn_sin_k_f64(h, l), zyn_cos_k_f64(h, l), (q & 1u) == 1u);
    // (a zero is itself: the kernel's x - (...) gave +0 for -0)
    return select(select(v, -v, q >= 2u), x, x == 0.0); }}"""
_FIXED["zyn_cos_f64"] = f"""\
fn zyn_cos_f64(x: f64) -> f64 {{
{_TRIG_HEAD}    let v = select(zyn_cos_k_f64(h, l), zyn_sin_k_f64(h, l), (q & 1u) == 1u);
    return select(v, -v, q == 1u || q == 2u); }}"""
_TAN = [3.33333333333334091986e-01, 1.33333333333201242699e-01, 5.39682539762260521377e-02,
        2.18694882948595424599e-02, 8.86323982359930005737e-03, 3.59207910759131235356e-03,
        1.45620945432529025516e-03, 5.88041240820264096874e-04, 2.46463134818469906812e-04,
        7.81794442939557092300e-05, 7.14072491382608190305e-05, -1.85586374855275456654e-05,
        2.59073051863633712884e-05]
_FIXED["zyn_tan_k_f64"] = f"""\
// fdlibm's kernel: tan(x + y), or -1 / tan(x + y) (odd), for |x| <= pi/4; past 0.6744 from
// tan(pi/4 - |x|); -1 / tan as a quotient corrected by split parts (a sine over a cosine was
// 3 ulp off)
fn zyn_tan_k_f64(x0: f64, y0: f64, odd: bool) -> f64 {{
    let big = abs(x0) >= 0.6744;
    var x = x0; var y = y0;
    if (big) {{
        x = (7.85398163397448278999e-01 - abs(x0)) + (3.06161699786838301793e-17 - select(y0, -y0, x0 < 0.0));
        y = 0.0;
    }}
    let z = x * x;
    let w = z * z;
    let s = z * x;
    let r = y + z * (s * (({_horner("w", _TAN[1::2])}) + z * ({_horner("w", _TAN[2::2])})) + y)
        + {_TAN[0]!r} * s;
    let t = x + r;
    if (big) {{
        let v = select(f64(1.0), -1.0, odd);
        let u = v - 2.0 * (x - (t * t / (t + v) - r));
        return select(u, -u, x0 < 0.0);
    }}
    if (!odd) {{ return t; }}
    let th = zyn_split_f64(t).x;
    let a = -1.0 / t;
    let ah = zyn_split_f64(a).x;
    return ah + a * ((1.0 + ah * th) + ah * (r - (th - x))); }}"""
_FIXED["zyn_tan_f64"] = f"""\
fn zyn_tan_f64(x: f64) -> f64 {{
{_TRIG_HEAD}    return select(zyn_tan_k_f64(h, l, (q & 1u) == 1u), x, x == 0.0); }}"""
# fdlibm's erf and erfc (FreeBSD's s_erf.c): rationals in x^2 below 0.84375 and in |x| - 1 below
# 1.25; past them erfc(a) = exp(-a^2 - 0.5625 + R(1/a^2) / S(1/a^2)) / a, a^2 taken as z^2 +
# (a - z)(a + z), z a's leading 23 bits (z^2 exact)
_ERF = {
    "PP": [1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
           -5.77027029648944159157e-03, -2.37630166566501626084e-05],
    "QQ": [1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
           1.32494738004321644526e-04, -3.96022827877536812320e-06],
    "PA": [-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
           3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
           -2.16637559486879084300e-03],
    "QA": [1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
           1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02],
    "RA": [-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
           -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
           -8.12874355063065934246e+01, -9.81432934416914548592e+00],
    "SA": [1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
           6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
           6.57024977031928170135e+00, -6.04244152148580987438e-02],
    "RB": [-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
           -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
           -4.83519191608651397019e+02],
    "SB": [1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
           3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
           -2.24409524465858183362e+01],
}
_ERX = 8.45062911510467529297e-01       # erf(1) rounded to 24 bits
_FIXED["zyn_erfc_tail_f64"] = f"""\
// erfc(a + l) 2^s for 1.25 <= a < 28, l below a's last digit (gelu's): l moves the exponent
// by its slope -2a - 1/a
fn zyn_erfc_tail_f64(a: f64, l: f64, s: i32) -> f64 {{
    let w = 1.0 / (a * a);
    var r: f64;
    if (a < 2.857142857142857) {{ r = ({_horner("w", _ERF["RA"])}) / ({_horner("w", _ERF["SA"])}); }}
    else {{ r = ({_horner("w", _ERF["RB"])}) / ({_horner("w", _ERF["SB"])}); }}
    let z = zyn_split_f64(a).x;
    return zyn_expl_f64(-z * z - 0.5625, 0.0, s) * zyn_exp_f64((z - a) * (z + a) - (2.0 * a + 1.0 / a) * l + r) / a; }}"""
_ERF_SMALL = f"""\
    let z = x * x;
    let y = x * (({_horner("z", _ERF["PP"])}) / ({_horner("z", _ERF["QQ"])}));
    let p = ({_horner("(a - 1.0)", _ERF["PA"])}) / ({_horner("(a - 1.0)", _ERF["QA"])});
"""
_FIXED["zyn_erf_f64"] = f"""\
fn zyn_erf_f64(x: f64) -> f64 {{
    let a = abs(x);
{_ERF_SMALL}    if (a < 0.84375) {{ return x + y; }}     // (-0.0 + -0.0: a zero keeps its sign)
    if (zyn_isnan_f64(x)) {{ return x; }}
    var v: f64 = 1.0;
    if (a < 1.25) {{ v = {_ERX!r} + p; }} else if (a < 6.0) {{ v = 1.0 - zyn_erfc_tail_f64(a, 0.0, 0i); }}
    return select(v, -v, x < 0.0); }}"""
_FIXED["zyn_erfc_f64"] = f"""\
// erfc(x + l), l below x's last digit
fn zyn_erfc_f64(x: f64, l: f64) -> f64 {{
    let a = abs(x);
    if (zyn_isnan_f64(x)) {{ return x; }}
    if (a >= 1.25) {{
        if (a >= 28.0) {{ return select(f64(0.0), 2.0, x < 0.0); }}
        let t = zyn_erfc_tail_f64(a, select(l, -l, x < 0.0), 0i);
        return select(t, 2.0 - t, x < 0.0);
    }}
{_ERF_SMALL}    // (erfc's slope -2 / sqrt(pi) e^-x^2 times l)
    let d = l * 1.1283791670955126 * zyn_exp_f64(-z);
    if (a < 0.84375) {{ return select(0.5 - ((x - 0.5) + (y + d)), 1.0 - (x + (y + d)), x < 0.25); }}
    return select(1.0 + ({_ERX!r} + p), {1.0 - _ERX!r} - p, x > 0.0) - d; }}"""
_FIXED["zyn_gelu_f64"] = """\
// x / 2 erfc(-x / sqrt(2)) (docs/language.md), -x / sqrt(2) in two parts: its rounding, times
// erfc's slope 2 |x|, was 13 ulp at -5 and some 900 at -30. Past -36 (a subnormal result)
// erfc times 2^64, the product rounded once
fn zyn_gelu_f64(x: f64) -> f64 {
    let u = zyn_twoprod_f64(x, -0.7071067811865476);
    let l = u.y + x * 4.833646656726457e-17;
    if (x < -36.0 && x > -40.0) { return ldexp(0.5 * x * zyn_erfc_tail_f64(u.x, l, 64i), -64i); }
    return 0.5 * x * zyn_erfc_f64(u.x, l); }"""
_FIXED["zyn_powi_f64"] = f"""\
// a^n of a whole 0 < |n| < 2^31 (a > 0 finite) by squaring in two parts, values (hi + lo) 2^e
// with hi in [1, 2]: each product exact to 2^-100 or so, the result rounded once (a
// subnormal one twice), so that a whole power f64 holds is exact, as numpy's
fn zyn_ddmul_f64(a: vec2<f64>, b: vec2<f64>) -> vec2<f64> {{
    let p = zyn_twoprod_f64(a.x, b.x);
    let e = p.y + (a.x * b.y + a.y * b.x);
    let s = zyn_hide_f64(p.x + e);
    return vec2<f64>(s, e - zyn_hide_f64(s - p.x)); }}
fn zyn_ddnorm_f64(v: vec2<f64>, e: f64) -> vec3<f64> {{
    let big = v.x >= 2.0;
    return vec3<f64>(select(v, v * 0.5, big), e + select(f64(0.0), 1.0, big)); }}
fn zyn_powi_f64(a: f64, n: f64) -> f64 {{
    let fe = zyn_frexp_f64(a);
    var p = vec2<f64>(fe.x, 0.0);
    var pz = fe.y;
    if (n < 0.0) {{        // 2 / m in two parts: the residual 1 - q m is exact
        let q = 1.0 / p.x;
        let e = zyn_twoprod_f64(q, p.x);
        p = vec2<f64>(q * 2.0, (zyn_hide_f64(1.0 - e.x) - e.y) * q * 2.0);
        pz = -pz - 1.0;
    }}
    var r = vec3<f64>(1.0, 0.0, 0.0);
    var k = u32(abs(n));
    for (var i = 0; i < 32; i++) {{
        if ((k & 1u) != 0u) {{ r = zyn_ddnorm_f64(zyn_ddmul_f64(r.xy, p), r.z + pz); }}
        k = k >> 1u;
        // past 2^+-1100 with factors to come: inf or 0 as the base is above 1 or below
        if (k == 0u || abs(r.z) > 1100.0 || abs(pz) > 1100.0) {{ break; }}
        let s = zyn_ddnorm_f64(zyn_ddmul_f64(p, p), pz * 2.0);
        p = s.xy;
        pz = s.z;
    }}
    if (k != 0u || r.z > 1024.0 || r.z < -1080.0) {{ return select(0.0, {_INF64}, pz >= 0.0); }}
    return ldexp(r.x + r.y, i32(r.z)); }}"""
_FIXED["zyn_log_dd_f64"] = f"""\
// log(a) of a finite a > 0 in two parts, to 2^-66 or so of itself: a = m 2^k, m in
// [sqrt(1/2), sqrt(2)), c = j / 32 m's nearest, log m = log c (a table in two parts) +
// 2 atanh(s), s = (m - c) / (m + c) in two parts, |s| < 0.011, its series' tail in f64
fn zyn_log_dd_f64(a: f64) -> vec2<f64> {{
    var th = array<f64, 23>({", ".join(map(repr, _LOG_HI))});
    var tl = array<f64, 23>({", ".join(map(repr, _LOG_LO))});
    let fe = zyn_frexp_f64(a);
    let big = fe.x > 1.4142135623730951;
    let m = select(fe.x, fe.x * 0.5, big);
    let k = fe.y + select(f64(0.0), 1.0, big);
    let j = round(m * 32.0);
    let c = j * 0.03125;
    let d = zyn_twosum_f64(m, c);
    let sh = (m - c) / d.x;
    let e = zyn_twoprod_f64(sh, d.x);
    let sl = ((zyn_hide_f64((m - c) - e.x) - e.y) - sh * d.y) / d.x;
    let z = sh * sh;
    let i = i32(j) - 23i;
    let u = zyn_twosum_f64(k * 6.93147180369123816490e-01, th[i]);
    let v = zyn_twosum_f64(u.x, 2.0 * sh);
    let lo = (u.y + v.y) + (tl[i] + k * 1.90821492927058770002e-10) + 2.0 * (sl + sh * z * ({_horner("z", [1 / 3, 1 / 5, 1 / 7, 1 / 9, 1 / 11])}));
    return zyn_twosum_f64(v.x, lo); }}"""
_FIXED["zyn_pow_pos_f64"] = f"""\
// a^b of a > 0 finite, b finite, as exp(b log a) with log a and the product in two parts
// (a one-part log's rounding, times b, was most of the error)
fn zyn_pow_pos_f64(a: f64, b: f64) -> f64 {{
    if (b == 0.5) {{ return sqrt(a); }}
    // |b| past 2^64: |b log a| > 2000 (|log a| > 2^-53)
    if (abs(b) > 1.8446744073709552e19) {{ return select(0.0, {_INF64}, (a > 1.0) == (b > 0.0)); }}
    let l = zyn_log_dd_f64(a);
    let p = zyn_twoprod_f64(b, l.x);
    return zyn_expl_f64(p.x, p.y + b * l.y, 0i); }}"""
_FIXED["zyn_pow_f64"] = f"""\
fn zyn_pow_f64(a: f64, b: f64) -> f64 {{
    // numpy's power (C's pow): a^0 and 1^b are 1 (a NaN too), a NaN otherwise NaN, 0 and
    // infinite bases and exponents by their signs, a negative base with a whole exponent
    // defined (an odd one negative) and with another NaN
    if (b == 0.0 || a == 1.0) {{ return 1.0; }}
    if (zyn_isnan_f64(a) || zyn_isnan_f64(b)) {{ return {_NAN64}; }}
    let ab = abs(b);
    let aa = abs(a);
    if (!(ab <= 1.7976931348623157e308)) {{
        return select(select(0.0, {_INF64}, (aa < 1.0) == (b < 0.0)), 1.0, a == -1.0);
    }}
    let whole = floor(b) == b;
    let odd = whole && ab < 9007199254740992.0 && floor(b * 0.5) * 2.0 != b;
    let neg = (bitcast<u32>(f32(a)) & 0x80000000u) != 0u;       // (-0.0 too)
    var r: f64;
    if (aa == 0.0) {{ r = select(0.0, {_INF64}, b < 0.0); }}
    else if (!(aa <= 1.7976931348623157e308)) {{ r = select(0.0, {_INF64}, b > 0.0); }}
    else if (neg && !whole) {{ return {_NAN64}; }}
    else if (aa == 1.0) {{ r = 1.0; }}
    else if (whole && ab < 2147483648.0) {{ r = zyn_powi_f64(aa, b); }}
    else {{ r = zyn_pow_pos_f64(aa, b); }}
    return select(r, -r, neg && odd); }}"""

_FIXED["zyn_fmod_f32"] = """\
// C's fmod, exact, in integers: WGSL's float % is x - y * trunc(x / y), which loses the
// remainder once the quotient has more digits than f32 (8216181.5 % 18.093166 gave 2.5, not
// 2.287201), and float steps on subnormals depend on the adapter (GL's ldexp of one gave 0:
// x % 6e-45 was x). Long division of the significands, a subnormal's normalised (its
// exponent below 1): y's in x's binade, subtracted where it fits, one bit a step (at most
// 277: bounded, as llvmpipe ran an infinite x's lane of a float loop to its limit).
fn zyn_fmod_f32(x: f32, y: f32) -> f32 {
    let ax = bitcast<u32>(x) & 0x7fffffffu;
    let ay = bitcast<u32>(y) & 0x7fffffffu;
    let sign = bitcast<u32>(x) & 0x80000000u;
    if (ay == 0u || ay > 0x7f800000u || ax >= 0x7f800000u) { return bitcast<f32>(0x7fc00000u); }
    if (ax < ay) { return x; }              // y infinite too
    var mx = (ax & 0x7fffffu) | select(0x800000u, 0u, ax < 0x800000u);
    var my = (ay & 0x7fffffu) | select(0x800000u, 0u, ay < 0x800000u);
    var ex = select(i32(ax >> 23u), 9 - i32(countLeadingZeros(mx)), ax < 0x800000u);
    let ey = select(i32(ay >> 23u), 9 - i32(countLeadingZeros(my)), ay < 0x800000u);
    mx = mx << (countLeadingZeros(mx) - 8u);
    my = my << (countLeadingZeros(my) - 8u);
    for (var i = 0; i < 280 && ex > ey; i++) {
        if (mx >= my) { mx = mx - my; }
        mx = mx << 1u;
        ex = ex - 1;
    }
    if (mx >= my) { mx = mx - my; }
    if (mx == 0u) { return bitcast<f32>(sign); }
    let shift = countLeadingZeros(mx) - 8u;         // back to 24 significant bits
    mx = mx << shift;
    ex = ex - i32(shift);
    let bits = select(mx >> u32(1 - ex), (mx & 0x7fffffu) | (u32(ex) << 23u), ex > 0);
    return bitcast<f32>(bits | sign); }"""

for _t in ("f32", "f64"):
    _FIXED[f"zyn_sq_{_t}"] = f"fn zyn_sq_{_t}(a: {_t}) -> {_t} {{ return a * a; }}"
_FIXED["zyn_fmod_f64"] = (
    "// C's fmod, exact: long division (as zyn_fmod_f32, in floats: WGSL has no 64-bit\n"
    "// integers): |y| doubled up to x's binade, subtracted where it fits (exactly: d <= r <\n"
    "// 2d), halved back down to |y|; bounded loops (llvmpipe ran an infinite lane to the limit)\n"
    "fn zyn_fmod_f64(x: f64, y: f64) -> f64 {\n"
    "    let small = abs(x) < abs(y);      // x itself, y infinite too\n"
    "    let bad = !(abs(y) > 0.0) || zyn_isnan_f64(y) || zyn_isnan_f64(x - x);  // NaN\n"
    "    let b = select(abs(y), 1.0, small || bad);\n"
    "    var r = select(abs(x), 0.0, small || bad);\n"
    "    var d = b;\n"
    "    for (var i = 0; i < 2200 && d + d <= r; i++) { d = d + d; }\n"
    "    for (var i = 0; i < 2200; i++) {\n        if (r >= d) { r = r - d; }\n"
    "        if (d <= b) { break; }\n        d = d * 0.5;\n    }\n"
    "    let nan = f64(bitcast<f32>(0x7fc00000u));\n"
    "    return select(select(select(r, -r, x < 0.0), nan, bad), x, small); }")
for _t in ("f32", "f64"):
    for _fn in ("max", "min"):
        _FIXED[f"zyn_{_fn}_{_t}"] = (
            "// max and min are numpy's maximum and minimum: NaN propagates, and of equal values the\n"
            "// second (max(0.0, -0.0) is -0.0); each case its own select, or a shader compiler takes\n"
            "// the first for its own max, which may give either zero and drop a NaN (OpenGL's did)\n"
            if (_t, _fn) == ("f32", "max") else "") + (
            f"fn zyn_{_fn}_{_t}(a: {_t}, b: {_t}) -> {_t} {{\n"
            f"    let r = select(select(b, a, a {'>' if _fn == 'max' else '<'} b), b, a == b);\n"
            f"    return select(select(r, b, zyn_isnan_{_t}(b)), a, zyn_isnan_{_t}(a)); }}")


def _helper(name: str) -> str:
    if name in _FIXED:
        return _FIXED[name]
    kind, _, dtype = name[4:].partition("_")
    t = TYPES[dtype]
    z, m1 = ("0u", "") if t == "u32" else ("0i", "-1i")
    val = "bitcast<i32>(a)" if t == "u32" else "a"
    if kind == "ipow":
        one = "1u" if t == "u32" else "1i"
        two = "2u" if t == "u32" else "2i"
        # by squaring: an exponent of 2^30 takes 31 steps (and stays far below llvmpipe's
        # 65,535 iterations a thread may loop)
        return (f"fn zyn_ipow_{t}(a0: {t}, b0: {t}) -> {t} {{\n"
                f"    var r: {t} = {one}; var a = a0; var b = b0;\n"
                f"    for (; b > {z}; b = b / {two}) {{ if (b % {two} == {one}) {{ r = r * a; }} a = a * a; }}\n"
                f"    return r; }}")
    if kind == "idiv":
        over = "" if t == "u32" else (
            f"    if (b == {m1} && a == {_INT_MIN[dtype]}) {{ zyn_fail(sov, a); return {z}; }}\n")
        return (f"// integer division truncating as C; by 0 (and MIN / -1) it fails\n"
                f"fn zyn_idiv_{dtype}(a: {t}, b: {t}, s0: i32, sov: i32) -> {t} {{\n"
                f"    if (b == {z}) {{ zyn_fail(s0, {val}); return {z}; }}\n{over}"
                f"    return {'a / b' if t == 'u32' else 'zyn_tdiv(a, b)'}; }}")
    if kind == "irem":
        minus = "" if t == "u32" else f" if (b == {m1}) {{ return {z}; }}"
        return (f"fn zyn_irem_{dtype}(a: {t}, b: {t}, s0: i32) -> {t} {{\n"
                f"    if (b == {z}) {{ zyn_fail(s0, {val}); return {z}; }}{minus}\n"
                f"    return {'a % b' if t == 'u32' else 'zyn_trem(a, b)'}; }}")
    raise KeyError(name)
