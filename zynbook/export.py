"""`zynbook export NOTEBOOK.ipynb`: a self-contained HTML page in which each compute block
of the notebook runs on the reader's own GPU through WebGPU, with no server and no Python.

The notebook's code runs once here on the CPU reference executor (every `@device` taken as
`cpu`), which records each launch: the kernel, its inputs, sizes and scalars, and its
output. Each launch becomes the WGSL of the WebGPU back end and its launch plan for the
guaranteed WebGPU limits (zynbook/backends/browser/plan.py, as `browser:N` sends it), with
its inputs embedded and the reference output beside them. The page carries the runner of
`browser:N` (zynbook/backends/browser/runner.js, inlined): a Run button per block (and one
for all) dispatches the plan on the reader's GPU, checks the result against the stored
output and shows the time (GPU timestamps where the adapter has them).

ZynML notebooks: every ZynML part of every code cell runs (`%python` lines and cells are
left out). Python notebooks: code cells run as Python (magic and shell lines dropped) and
`%%compute` cells as ZynML with their free names taken from the Python namespace.
"""
from __future__ import annotations

import base64
import contextlib
import html
import io
import json
import re
import threading
from pathlib import Path

import numpy as np

from .backends.browser import plan as plans
from .backends.registry import get_device
from .backends.webgpu import runtime as rt
from .compiler.codegen import wgsl

RUNNER = Path(__file__).parent / "backends" / "browser" / "runner.js"
MAX_LAUNCHES = 24               # launches exported per notebook (the first of each kind)
MAX_BYTES = 48 << 20            # inputs and outputs embedded, in all
_DEVICE = re.compile(r"@device\(\s*(\"[^\"]*\"|\[[^\]]*\])\s*\)")


class _Recorder:
    """Records the launches of the CPU reference device while a notebook runs."""

    def __init__(self):
        self.launches: list = []
        self.cell = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def recording(self):
        dev = get_device("cpu")
        original = dev.launch

        def launch(kernel, inputs, sizes, scalars):
            out, info = original(kernel, inputs, sizes, scalars)
            with self._lock:
                self.launches.append((self.cell, kernel, [np.array(a) for a in inputs],
                                      dict(sizes), dict(scalars), np.array(out)))
            return out, info

        dev.launch = launch
        try:
            yield self
        finally:
            del dev.launch


def _cells(nb: dict) -> list:
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb.get("cells", []) if c.get("cell_type") == "code"]


def _run_zynml(cells: list, recorder: _Recorder) -> list:
    """ZynML cells: ZynML parts run in one session; `%python` lines and `%%python` cells run
    as Python in one namespace; names pass between the two as in the ZynML kernel."""
    import zynbook

    from .kernel.cells import split_cell
    from .session import Session

    notes = []
    namespace: dict = {"np": np, "numpy": np, "zynbook": zynbook}
    session = Session(device="cpu")
    for n, cell in enumerate(cells):
        recorder.cell = n + 1
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                for part in split_cell(cell):
                    if part.kind == "python":
                        exec(compile(part.text, f"<cell {n + 1}>", "exec"), namespace)
                    elif part.kind == "zynml" and part.text.strip():
                        _zynml(session, part.text, namespace)
        except Exception as exc:       # a cell that fails here is left out
            notes.append(f"cell {n + 1}: {type(exc).__name__}: {_short(exc)}")
    return notes


def _short(exc) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else ""


def _zynml(session, text: str, namespace: dict):
    """Run ZynML `text` with its free names from `namespace`; its bindings go back there."""
    from .compiler.parser import parse
    from .kernel.cells import free_names
    from .kernel.display import bindable

    try:
        free = free_names(parse(text))
    except Exception:
        free = ()
    env = {k: namespace[k] for k in free if k in namespace and k not in session.namespace
           and bindable(namespace[k])}
    before = dict(session.namespace)
    session.run(_DEVICE.sub('@device("cpu")', text), **env)
    for name, value in session.namespace.items():
        if name.startswith("_") or before.get(name) is value:
            continue
        namespace[name] = np.asarray(value.numpy()) if hasattr(value, "numpy") else value


def _run_python(cells: list, recorder: _Recorder) -> list:
    import zynbook

    from .session import Session
    notes = []
    namespace: dict = {"np": np, "numpy": np, "zynbook": zynbook}
    session = Session(device="cpu")
    for n, cell in enumerate(cells):
        recorder.cell = n + 1
        first, _, body = cell.partition("\n")
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                if first.startswith("%%compute"):
                    _zynml(session, body, namespace)
                elif not first.startswith("%%"):
                    code = "\n".join(line for line in cell.splitlines()
                                     if not line.lstrip().startswith(("%", "!")))
                    exec(compile(code, f"<cell {n + 1}>", "exec"), namespace)
        except Exception as exc:
            notes.append(f"cell {n + 1}: {type(exc).__name__}: {_short(exc)}")
    return notes


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _blocks(recorder: _Recorder) -> tuple[list, list]:
    blocks, notes, seen, total = [], [], set(), 0
    opts = plans.options({})
    for cell, kernel, inputs, sizes, scalars, out in recorder.launches:
        key = (kernel.stable_hash(), tuple(sorted(sizes.items())))
        if key in seen:
            continue
        seen.add(key)
        if len(blocks) >= MAX_LAUNCHES:
            notes.append(f"{kernel.name}: left out (more than {MAX_LAUNCHES} launches)")
            continue
        try:
            program = wgsl.render(kernel, plans.specialised(opts, kernel, sizes))
            plan = plans.build(program, kernel, inputs, sizes, scalars, {})
        except Exception as exc:
            notes.append(f"{kernel.name}: no WebGPU program ({exc})")
            continue
        expected = rt.to_storage(np.asarray(out).reshape(plan.out_shape), plan.out_storage)
        size = plan.nbytes + expected.nbytes
        if total + size > MAX_BYTES:
            notes.append(f"{kernel.name}: left out (its data would pass {MAX_BYTES >> 20} MB)")
            continue
        total += size
        exact = plan.out_storage in ("i32", "u32")
        blocks.append({
            "kernel": kernel.name, "kind": kernel.kernel_type.kind, "cell": cell,
            "zynml": kernel.source or "",
            "inputs": [{"name": b.name, "dtype": b.dtype, "shape": list(np.shape(a))}
                       for b, a in zip(kernel.inputs, inputs)],
            "output": {"dtype": plan.out_dtype, "storage": plan.out_storage,
                       "shape": list(plan.out_shape)},
            "plan": plan.spec, "data": [_b64(d) for d in plan.data],
            "expected": _b64(expected.tobytes()),
            "tolerance": {"rtol": 0.0, "atol": 0.0} if exact else {"rtol": 2e-3, "atol": 2e-4},
            "schedule": program.schedule,
        })
    return blocks, notes


def export_notebook(path, out=None, title: str | None = None) -> Path:
    """Write the live HTML page of the notebook at `path` (next to it, `.html`, unless
    `out` is given); returns the page's path."""
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    language = (nb.get("metadata", {}).get("kernelspec", {}).get("language")
                or nb.get("metadata", {}).get("language_info", {}).get("name") or "zynml")
    recorder = _Recorder()
    cells = _cells(nb)
    with recorder.recording():
        if language.lower() == "python":
            notes = _run_python(cells, recorder)
        else:
            notes = _run_zynml(cells, recorder)
    blocks, more = _blocks(recorder)
    page = render_page(title or path.stem, blocks, notes + more)
    target = Path(out) if out else path.with_suffix(".html")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target


def runner_script() -> str:
    """runner.js as a classic script (its `export` keywords removed)."""
    return re.sub(r"^export ", "", RUNNER.read_text(encoding="utf-8"), flags=re.M)


def _json_script(value) -> str:
    return json.dumps(value).replace("</", "<\\/")


def render_page(title: str, blocks: list, notes: list) -> str:
    sections = []
    for n, b in enumerate(blocks):
        ins = ", ".join(f"{i['name']} {i['dtype']}{i['shape']}" for i in b["inputs"]) or "none"
        o = b["output"]
        sections.append(f"""
<section class="zb-block" id="block-{n}" data-index="{n}" data-kernel="{html.escape(b['kernel'])}"
         data-status="pending">
  <h2>{html.escape(b['kernel'])} <small>{html.escape(b['kind'])} · cell {b['cell']} ·
      schedule {html.escape(b['schedule'])}</small></h2>
  <pre class="zb-zynml">{html.escape(b['zynml'])}</pre>
  <p class="zb-io">inputs: {html.escape(ins)} → out {html.escape(o['dtype'])}{o['shape']}</p>
  <details><summary>generated WGSL</summary><pre class="zb-wgsl">{html.escape(b['plan']['source'])}</pre></details>
  <p><button class="zb-run" data-index="{n}">Run</button>
     <span class="zb-result"></span> <span class="zb-time"></span></p>
</section>""")
    note_html = "".join(f"<li>{html.escape(x)}</li>" for x in notes)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'">
<title>{html.escape(title)} · ZynBook live page</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }}
pre {{ background: #f6f6f6; padding: .6em; overflow: auto; max-height: 24em; }}
.zb-block {{ border-top: 1px solid #ddd; padding: .5em 0; }}
.zb-block[data-status=match] .zb-result {{ color: #176b2c; }}
.zb-block[data-status=mismatch] .zb-result, .zb-block[data-status=error] .zb-result {{ color: #b00020; }}
small {{ color: #666; font-weight: normal; }}
#adapter {{ color: #444; }}
</style></head>
<body data-state="idle">
<h1>{html.escape(title)}</h1>
<p>Each compute block of this notebook, as ZynBook's WebGPU back end compiled it, runs here on
your own GPU through WebGPU; its output is checked against the values the notebook computed.
Nothing is sent anywhere.</p>
<p id="adapter">GPU: not opened yet</p>
<p><button id="run-all">Run all on this GPU</button> <span id="summary"></span></p>
{''.join(sections) or '<p>This notebook has no compute block to export.</p>'}
{f'<h3>Left out</h3><ul>{note_html}</ul>' if note_html else ''}
<script type="application/json" id="zb-blocks">{_json_script(blocks)}</script>
<script>
{runner_script()}
{_PAGE_SCRIPT}
</script>
</body></html>
"""


_PAGE_SCRIPT = r"""
(function () {
  const blocks = JSON.parse(document.getElementById('zb-blocks').textContent);
  const TYPED = { f32: Float32Array, i32: Int32Array, u32: Uint32Array };
  let gpu = null;
  let runner = null;
  function bytes(b64) {
    const s = atob(b64);
    const a = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
    return a;
  }
  async function open() {
    if (!gpu) {
      gpu = openGPU().then(g => {
        runner = new Runner(g);
        const i = g.info;
        document.getElementById('adapter').textContent =
          `GPU: ${i.name}${i.fallback ? ' (fallback adapter)' : ''}`;
        return g;
      });
    }
    return gpu;
  }
  function compare(b, raw) {
    const T = TYPED[b.output.storage];
    const n = b.output.shape.reduce((x, y) => x * y, 1);
    const got = new T(raw, 0, n);
    const want = new T(bytes(b.expected).buffer, 0, n);
    let worst = 0, bad = 0;
    for (let i = 0; i < n; i++) {
      const g = got[i], w = want[i];
      if (Number.isNaN(w) && Number.isNaN(g)) continue;
      const err = Math.abs(g - w);
      if (g === w) continue;
      if (!(err <= b.tolerance.atol + b.tolerance.rtol * Math.abs(w))) bad++;
      if (err > worst || Number.isNaN(err)) worst = err;
    }
    return { n, bad, worst };
  }
  async function run(index) {
    const b = blocks[index];
    const el = document.getElementById('block-' + index);
    const result = el.querySelector('.zb-result');
    const time = el.querySelector('.zb-time');
    el.dataset.status = 'running';
    result.textContent = 'running…';
    try {
      await open();
      const t0 = performance.now();
      const r = await runner.run(b.plan, b.data.map(bytes));
      const total = performance.now() - t0;
      if (r.outputs.length > 1 && new Int32Array(r.outputs[1])[0] !== 0) {
        throw new RunnerError('check', 'the kernel reported a runtime error (its error flag is set)');
      }
      const c = compare(b, r.outputs[0]);
      el.dataset.status = c.bad ? 'mismatch' : 'match';
      result.textContent = c.bad
        ? `${c.bad} of ${c.n} values differ from the notebook's (largest difference ${c.worst})`
        : `matches the notebook's ${c.n} values (largest difference ${c.worst.toExponential(2)})`;
      const k = r.times.kernel * 1000;
      time.textContent = `kernel ${k.toFixed(3)} ms (${r.times.source}), ` +
        `with upload, compile and read-back ${total.toFixed(1)} ms`;
    } catch (err) {
      el.dataset.status = 'error';
      result.textContent = `${err.kind ? err.kind + ': ' : ''}${err.message || err}`;
      time.textContent = '';
    }
  }
  document.querySelectorAll('.zb-run').forEach(btn =>
    btn.addEventListener('click', () => run(Number(btn.dataset.index))));
  document.getElementById('run-all').addEventListener('click', async () => {
    document.body.dataset.state = 'running';
    for (let i = 0; i < blocks.length; i++) await run(i);
    const ok = document.querySelectorAll('.zb-block[data-status=match]').length;
    document.getElementById('summary').textContent = `${ok} of ${blocks.length} blocks match`;
    document.body.dataset.state = 'done';
  });
})();
"""
