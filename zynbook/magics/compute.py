"""`%%compute`, `%zynml_devices`, `%zynml_device`, `%zynml_inspect`."""
from __future__ import annotations

import html

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display

from ..compiler.parser import parse
from ..kernel import cells
from ..kernel.display import bindable, code_bundle, is_tensor
from ..kernel.state import notebook_session


# ----------------------------------------------------------------------- values to Python

def to_python(value):
    """A ZynML value as Python code wants it: numpy for a tensor on `cpu`, CuPy (no copy,
    through DLPack) for `cuda:N`, the ZynBook tensor itself on other devices; lists and
    tuples element by element; everything else as it is."""
    if is_tensor(value):
        device = value.device
        if device == "cpu":
            return value.numpy()
        if device.startswith("cuda"):
            import cupy

            return cupy.from_dlpack(value)
        return value
    if isinstance(value, list):
        return [to_python(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_python(v) for v in value)
    return value


def _cell(value) -> str:
    """A device property for the table: memory in GiB, nothing for a missing one."""
    if value is None:
        return ""
    if isinstance(value, int) and value >= 2**30:
        return f"{value / 2**30:.1f} GiB"
    return str(value)


# --------------------------------------------------------------------------------- magics

@magics_class
class ComputeMagics(Magics):
    """See the package docstring."""

    @property
    def session(self):
        return notebook_session()

    @cell_magic
    def compute(self, line, cell):
        """%%compute [@annotation ...]: run the cell as ZynML (see `zynbook.magics`)."""
        source = cell
        program = parse(source)
        user_ns = self.shell.user_ns
        hidden = set(getattr(self.shell, "user_ns_hidden", {}))
        env = {name: user_ns[name] for name in cells.free_names(program)
               if name in user_ns and name not in hidden and not name.startswith("_")
               and bindable(user_ns[name])}
        session = self.session
        try:
            value, is_expr = session.run_cell(source, compute_annotations=line.strip(), **env)
        finally:
            for name in cells.bound_names(program):
                if name in session.namespace:
                    user_ns[name] = to_python(session.namespace[name])
        return to_python(value) if is_expr else None

    @line_magic
    def zynml_devices(self, line=""):
        """List the compute devices ZynBook sees (the default one is marked)."""
        from .. import compute_devices

        devices = compute_devices()
        default = self.session.default_device
        keys = ["id", "type", "name", "backend", "memory"]
        rows = [[_cell(d.get(k)) for k in keys] for d in devices]
        widths = [max(len(k), *(len(r[i]) for r in rows)) for i, k in enumerate(keys)]
        text = ["  " + "  ".join(k.ljust(w) for k, w in zip(keys, widths)).rstrip()]
        for d, r in zip(devices, rows):
            mark = "* " if d.get("id") == default else "  "
            text.append((mark + "  ".join(c.ljust(w) for c, w in zip(r, widths))).rstrip())
        head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
        bold = " style='font-weight:bold'"
        body = "".join(
            f"<tr{bold if d.get('id') == default else ''}>"
            + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
            for d, r in zip(devices, rows))
        display({"text/plain": "\n".join(text) + f"\n(* default device: {default})",
                 "text/html": f"<table><tr>{head}</tr>{body}</table>"
                              f"<div>default device: <code>{html.escape(default)}</code></div>"},
                raw=True)

    @line_magic
    def zynml_device(self, line=""):
        """%zynml_device ID: set the default device of %%compute cells (no ID: show it)."""
        device = line.strip().strip("'\"")
        if device:
            self.session.default_device = device
        print(f"default device: {self.session.default_device}")

    @line_magic
    def zynml_inspect(self, line=""):
        """Show the generated code of the compute blocks the last %%compute cell ran."""
        kernels = list(self.session.last_kernels or [])
        if not kernels:
            print("No compute block has run yet.")
            return
        display(code_bundle(kernels, list(self.session.launches or []), line.strip()),
                raw=True)
