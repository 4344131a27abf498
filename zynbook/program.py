"""`zynbook.compile`: a program parsed, checked and lowered, before any data is bound."""
from __future__ import annotations

from .compiler import cir
from .compiler.check import check_program
from .errors import ZynMLNameError, ZynMLTypeError
from .runtime.interp import CompiledKernel
from .runtime.plans import BlockCache
from .session import Session, parse_cached, session_device


class Program:
    """A checked ZynML program. Its compute blocks are lowered with what the program itself
    fixes (inputs not yet bound are taken as f32, of the rank the body indexes them with);
    running it binds the real inputs, and shapes are checked again then."""

    def __init__(self, source: str):
        if not isinstance(source, str):
            raise ZynMLTypeError(f"a ZynML program is text (a str), not "
                                 f"{type(source).__name__}")
        self.source = source
        self.ast = parse_cached(source)
        result = check_program(self.ast, source)
        self.free_names = dict(result.free_names)
        self.kernels = [CompiledKernel(k.lowered) for k in result.kernels]
        self._blocks = BlockCache()       # what its runs lowered and planned, for the next

    def cir_text(self, before_passes: bool = False) -> str:
        """The CIR of every compute block: after the pass pipeline (what the devices run),
        or as lowering wrote it (`before_passes`)."""
        return "\n\n".join(k.lowered_cir_text if before_passes else k.cir_text
                             for k in self.kernels)

    @property
    def notes(self) -> list:
        """(message, span) of what compiling noticed without refusing (a near-miss of a
        kernel type): also issued as `zynbook.errors.ZynMLWarning`."""
        return [n for k in self.kernels for n in k.lowered.notes]

    @property
    def cir(self) -> list:
        """The CIR kernels (`zynbook.compiler.cir.Kernel`) of the compute blocks, in order."""
        return [k.kernel for k in self.kernels]

    def sources(self, language: str) -> list:
        """The generated source of every compute block in one language."""
        every = [k.sources() for k in self.kernels]
        known = sorted({lang for got in every for lang in got})
        if every and language not in known:
            # (an empty text for each block read as a renderer that wrote nothing)
            raise ZynMLNameError(f"no renderer writes `{language}`; languages: "
                                 f"{', '.join(known)}")
        return [got.get(language, "") for got in every]

    def run(self, device: str | None = None, /, **env):
        """Run in a fresh session (names bound here only); a run with inputs of the same
        signature as an earlier one reuses its lowered blocks and launch plans. `device=`
        names the device (default "cpu") unless it is given by position, as in
        `zynbook.run`: `run("cpu", device=x)` binds an input named `device`."""
        session = Session(session_device(device, env))
        session.interpreter.blocks = self._blocks
        return session.run(self.source, **env)

    def __repr__(self):
        return f"<ZynML program: {len(self.kernels)} compute block(s), inputs " \
               f"{sorted(self.free_names) or 'none'}>"


def compile(source: str) -> Program:  # noqa: A001 - the public name mirrors Python's
    return Program(source)
