"""The launch IR as text, for the notebook inspector and for reading schedules.

`format_program(program)` spells a `Program` as indented pseudo-code: the launches the host
makes (`launch name<<<grid, block>>>` with the grid as a host expression), the scratch
buffers, the error sites, then every kernel with its parameters, block size, arrays and
statements. A statement that came from ZynML ends in `# line N` (followed by the source
text where the program has it and the line differs from the statement before). Literals
carry their dtype unless it is i32, f32 or bool; casts name the dtype they convert to;
`@thread`, `@block`, `@threads`, `@blocks`, `@lane` and `@warp` are where a thread runs;
`checked(i in 0..n, #s)` is an index checked against error site s. The text is
deterministic: the same program gives the same text.
"""
from __future__ import annotations

from . import ir
from .. import cir
from .scalar import DTYPE_BYTES

_INDENT = "  "
_COMMENT_COLUMN = 56

_PLAIN_DTYPES = ("i32", "f32", "bool")


def format_expr(e) -> str:
    """One expression as text."""
    return _expr(e, top=True)


def _lit(e: ir.Lit) -> str:
    v = e.value
    if isinstance(v, bool) or e.dtype == "bool":
        text = "true" if v else "false"
    elif e.dtype in ir.FLOAT_DTYPES:
        text = repr(float(v))           # nan, inf and -inf included
    else:
        text = str(int(v))
    return text if e.dtype in _PLAIN_DTYPES else f"{text}:{e.dtype}"


def _expr(e, top=False) -> str:
    if isinstance(e, ir.Lit):
        return _lit(e)
    if isinstance(e, ir.Ref):
        return e.name
    if isinstance(e, ir.Thread):
        return f"@{e.axis}" + ("" if e.dtype == "i32" else f":{e.dtype}")
    if isinstance(e, ir.Load):
        return f"{e.array}[{_expr(e.index, top=True)}]"
    if isinstance(e, ir.Bin):
        text = f"{_expr(e.a)} {e.op} {_expr(e.b)}"
        return text if top else f"({text})"
    if isinstance(e, ir.Un):
        return ("-" if e.op == "neg" else "!" if e.op == "not" else e.op) + _expr(e.a)
    if isinstance(e, ir.Math):
        return f"{e.fn}({', '.join(_expr(a, top=True) for a in e.args)})"
    if isinstance(e, ir.Cast):
        return f"{e.dtype}({_expr(e.a, top=True)})"
    if isinstance(e, ir.Select):
        return (f"select({_expr(e.cond, top=True)}, {_expr(e.a, top=True)}, "
                f"{_expr(e.b, top=True)})")
    if isinstance(e, (ir.Checked, ir.InRange)):
        what = "checked" if isinstance(e, ir.Checked) else "in_range"
        return f"{what}({_expr(e.index, top=True)} in 0..{_expr(e.extent)}, #{e.site})"
    if isinstance(e, ir.CheckedDiv):
        sites = f"#{e.site_zero}" + (f", #{e.site_overflow}" if e.site_overflow else "")
        return (f"checked({_expr(e.a)} {e.op} {_expr(e.b)}, {sites})")
    if isinstance(e, ir.Vector):
        return f"{e.dtype}({', '.join(_expr(a, top=True) for a in e.parts)})"
    if isinstance(e, ir.Lane):
        return f"{_expr(e.a)}.{e.lane}"
    if isinstance(e, ir.Collective):
        group = f"{e.scope}/{e.width}" if e.width else e.scope
        return f"{group}_reduce({e.op}, {_expr(e.value, top=True)}):{e.dtype}"
    return repr(e)


class _Writer:
    def __init__(self, program: ir.Program):
        self.out: list[str] = []
        self.lines = dict(program.lines or {})
        self.last_line = 0

    def put(self, depth: int, text: str, line: int = 0):
        text = _INDENT * depth + text
        if line:
            src = self.lines.get(line) if line != self.last_line else None
            self.last_line = line
            note = f"# line {line}" + (f": {str(src).strip()}" if src else "")
            text = text.ljust(_COMMENT_COLUMN - 1) + " " + note
        self.out.append(text)

    def block(self, stmts, depth: int):
        if not stmts:
            self.put(depth, "pass")
        for s in stmts:
            self.stmt(s, depth)

    def stmt(self, s, depth: int):
        line = getattr(s, "line", 0)
        if isinstance(s, ir.Decl):
            kw = "var" if s.mutable else "let"
            value = "" if s.value is None else f" = {format_expr(s.value)}"
            self.put(depth, f"{kw} {s.name}: {s.dtype}{value}", line)
        elif isinstance(s, ir.Set):
            self.put(depth, f"{s.name} = {format_expr(s.value)}", line)
        elif isinstance(s, (ir.Store, ir.Atomic)):
            guard = "" if s.guard is None else f"  if {format_expr(s.guard)}"
            op = "=" if isinstance(s, ir.Store) else "+=" if s.op == "+" else f"{s.op}="
            atomic = "atomic " if isinstance(s, ir.Atomic) else ""
            self.put(depth, f"{atomic}{s.array}[{format_expr(s.index)}] {op} "
                            f"{format_expr(s.value)}{guard}", line)
        elif isinstance(s, ir.For):
            step = "" if (isinstance(s.step, ir.Lit) and s.step.value == 1) \
                else f" step {format_expr(s.step)}"
            self.put(depth, f"for {s.var}: {s.dtype} in {format_expr(s.start)} .. "
                            f"{format_expr(s.stop)}{step}:", line)
            self.block(s.body, depth + 1)
        elif isinstance(s, ir.If):
            self.put(depth, f"if {format_expr(s.cond)}:", line)
            self.block(s.then, depth + 1)
            if s.orelse:
                self.put(depth, "else:")
                self.block(s.orelse, depth + 1)
        elif isinstance(s, ir.Barrier):
            self.put(depth, "barrier", line)
        elif isinstance(s, ir.NamedBarrier):
            self.put(depth, f"{'arrive at' if s.arrive else 'wait at'} barrier {format_expr(s.id)} "
                            f"of {s.threads} threads", line)
        elif isinstance(s, ir.Copy):
            self.put(depth, f"copy {s.dst}[{format_expr(s.dst_index)} ..+{s.count}] = "
                            f"{s.src}[{format_expr(s.src_index)} ..+{s.count}]  ({s.dtype})", line)
        elif isinstance(s, ir.Convert):
            self.put(depth, f"convert {s.dst}[{format_expr(s.dst_index)} ..+{s.count}] = "
                            f"{s.src}[{format_expr(s.src_index)} ..+{s.count}] as {s.dtype}", line)
        elif isinstance(s, ir.Array):
            self.put(depth, f"{s.space} {s.name}: {s.dtype}[{s.count}]", line)
        elif isinstance(s, ir.MatrixLoad):
            self.put(depth, f"ldmatrix x{s.count}{' trans' if s.trans else ''} ({s.dtype}) "
                            f"{s.dst}[{format_expr(s.dst_index)} ..+{2 * s.count}] = "
                            f"{s.src}[row at {format_expr(s.src_index)}]", line)
        elif isinstance(s, ir.Mma):
            m, n, k = s.shape
            self.put(depth, f"mma m{m}n{n}k{k} ({s.dtype}) {s.c}[{format_expr(s.c_index)} ..+4] += "
                            f"{s.a}[{format_expr(s.a_index)} ..+8] x {s.b}[{format_expr(s.b_index)} ..+4]",
                     line)
        elif isinstance(s, ir.WarpgroupMma):
            major = lambda k: "K-major" if k else "MN-major"
            a = "registers" if s.a_regs else f"{major(s.a_kmajor)}, lbo {s.a_lbo}, sbo {s.a_sbo}"
            fresh = "" if s.fresh is None else f" (from 0 where {format_expr(s.fresh)})"
            self.put(depth, f"wgmma m64n{s.n}k{s.k} ({s.dtype}) {s.c}[{format_expr(s.c_index)} ..+{s.n // 2}]"
                            f"{fresh} += {s.a}[{format_expr(s.a_index)}] ({a}) x "
                            f"{s.b}[{format_expr(s.b_index)}] ({major(s.b_kmajor)}, lbo {s.b_lbo}, sbo {s.b_sbo})",
                     line)
        elif isinstance(s, ir.WarpgroupFence):
            self.put(depth, f"wgmma fence {s.c}[..{s.count}]" + (f", {s.a}[..{s.a_count}]" if s.a else ""), line)
        elif isinstance(s, ir.WarpgroupCommit):
            self.put(depth, "wgmma commit", line)
        elif isinstance(s, ir.WarpgroupWait):
            self.put(depth, f"wgmma wait {s.pending} ({s.c}[..{s.count}])", line)
        elif isinstance(s, ir.ProxyFence):
            self.put(depth, "fence proxy.async shared", line)
        elif isinstance(s, ir.Mbarrier):
            what = {"init": f"init {s.count}", "arrive": "arrive" + (f" expecting {s.tx} bytes" if s.tx else ""),
                    "wait": f"wait parity {format_expr(s.parity) if s.parity is not None else ''}"}[s.op]
            self.put(depth, f"mbarrier {s.array}[{format_expr(s.index)}] {what}", line)
        elif isinstance(s, ir.TensorLoad):
            self.put(depth, f"tma {s.dst}[{format_expr(s.dst_index)} ..] = {s.map} box at "
                            f"({', '.join(format_expr(c) for c in s.coords)}) on "
                            f"{s.bar}[{format_expr(s.bar_index)}]", line)
        elif isinstance(s, ir.SetMaxRegisters):
            self.put(depth, f"registers {'up' if s.increase else 'down'} to {s.count}", line)
        else:
            self.put(depth, repr(s), line)

    def kernel(self, k: ir.Kernel):
        self.last_line = 0
        self.put(0, f"kernel {k.name}  block {k.block}  index {k.index_dtype}")
        for text in (k.comment or "").splitlines():
            self.put(1, f"// {text}")
        for p in k.params:
            if p.kind in ("buffer", "scratch"):
                mode = " writable" if p.writable or p.kind == "scratch" else ""
                self.put(1, f"param {p.name}: {p.dtype}[] {p.kind}{mode}")
            else:
                self.put(1, f"param {p.name}: {p.dtype} {p.kind}")
        arrays = [s for s in ir.walk(k.body) if isinstance(s, ir.Array)]
        shared = sum(s.count * _bytes(s.dtype) for s in arrays if s.space == "shared")
        local = sum(s.count * _bytes(s.dtype) for s in arrays if s.space == "local")
        if arrays:
            self.put(1, f"arrays: {shared} bytes shared, {local} bytes local per thread")
        self.put(1, "body:")
        self.block(k.body, 2)


def _bytes(dtype: str) -> int:
    return DTYPE_BYTES.get(ir.element_of(dtype), 4) * ir.lanes_of(dtype)


def _site(i: int, site) -> str:
    """Error site `i` (an errflag.Site) as text."""
    text = f"#{i} {site.kind}"
    if site.buffer:
        text += f" `{site.buffer}` extent {cir.format_dim(site.extent)}"
    if site.line:
        text += f"  line {site.line}"
    return text


def format_program(program: ir.Program) -> str:
    """The whole program as text (see the module docstring)."""
    w = _Writer(program)
    w.put(0, f"program {program.name}")
    if program.schedule:
        w.put(1, f"schedule: {program.schedule}")
    for note in program.notes or ():
        w.put(1, f"note: {note}")
    for s in program.scratch:
        w.put(1, f"scratch {s.name}: {s.dtype}[{format_expr(s.count)}]")
    for m in program.tensor_maps:
        w.put(1, f"tensor map {m.name}: {m.buffer} as {m.dtype}[{', '.join(format_expr(d) for d in m.dims)}] "
                 f"(innermost first), strides {', '.join(format_expr(d) for d in m.strides)}, box {m.box}")
    if program.sites:
        w.put(1, "error sites:")
        for i, site in enumerate(program.sites, 1):
            w.put(2, _site(i, site))
    for launch in program.launches:
        w.put(1, f"launch {launch.kernel}<<<{format_expr(launch.grid)}, {launch.block}>>>")
    for k in program.kernels:
        w.put(0, "")
        w.kernel(k)
    return "\n".join(w.out) + "\n"
