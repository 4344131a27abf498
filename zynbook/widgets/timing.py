"""The timing widget: per launch compile / upload / kernel / download, as bars."""
from __future__ import annotations

import sys
import time

import ipywidgets as W

from ..errors import ZynMLError
from ..kernel.state import notebook_session
from .views import PHASES, compare_html, timing_html, timing_svg, timing_table  # noqa: F401


def _ipython():
    """The running IPython shell, if any."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


class TimingWidget(W.VBox):
    """Bars of per-launch times. `TimingWidget()` shows the session's last launches;
    `TimingWidget.compare(source, devices)` runs `source` on each device and shows them side
    by side."""

    def __init__(self, launches=None, session=None, **kwargs):
        self.session = session
        self.mode = W.ToggleButtons(options=["launches", "compare"], value="launches",
                                    style={"button_width": "90px"})
        self.chart = W.HTML()
        self.results: dict = {}
        super().__init__([self.mode, self.chart], **kwargs)
        self.mode.observe(lambda change: self._render(), names="value")
        self.update(launches)

    def _session(self):
        return self.session if self.session is not None else notebook_session()

    def update(self, launches=None, kernels=None) -> None:
        """Show `launches` (default: the last cell of the session that launched kernels)."""
        if launches is None:
            from ..kernel.state import last_run

            kernels, launches = last_run(self._session())
        self.launches = list(launches)
        self.kernels = list(kernels if kernels is not None else
                            self._session().last_kernels or [])
        self._render()

    def _render(self) -> None:
        self.mode.layout.display = "" if self.results else "none"
        if self.mode.value == "compare" and self.results:
            self.chart.value = compare_html(self.results)
        else:
            from ..kernel.display import kernel_label

            kernels = getattr(self, "kernels", [])
            namespace = getattr(self._session(), "namespace", {})
            self.labels = {k.name: kernel_label(k, namespace) for k in kernels}
            self.chart.value = timing_html(self.launches, kernels, self.labels)

    def run_compare(self, source: str, devices=None, env=None, repeat: int = 5) -> dict:
        """Run `source` on every device (a list, or ids between commas; default: all of
        compute_devices()) once to compile, then `repeat` times, in a fresh session each;
        keep every wall time and the launches of the run with the median one. `env`: names the source reads (default: the notebook session's values)."""
        from .. import Session, compute_devices
        from ..magics.compare import device_list, unplaced

        if devices is None:
            devices = [d["id"] for d in compute_devices()]
        elif isinstance(devices, str):
            # one id, or several as %%compare takes them (each letter was taken for an id)
            devices = device_list(devices)
        if not devices:     # (an empty chart, said nothing)
            from ..errors import ZynMLDeviceError
            raise ZynMLDeviceError("TimingWidget.compare: `devices` names no device; give "
                                   "ids such as 'cpu,vulkan:0', or None for every device")
        env = unplaced(self._notebook_env(source) if env is None else env)
        results = {}
        for device in devices:
            try:
                session = Session(device=device)
                session.run(source, **env)        # the first run compiles
                runs = []
                for _ in range(max(1, repeat)):
                    t0 = time.perf_counter()
                    session.run(source, **env)
                    runs.append((time.perf_counter() - t0, list(session.launches or []),
                                 list(session.last_kernels or [])))
                # the run with the median wall time stands for the device
                runs.sort(key=lambda r: r[0])
                wall, launches, kernels = runs[len(runs) // 2]
                results[device] = {"launches": launches, "kernels": kernels, "wall": wall,
                                   "walls": [r[0] for r in runs]}
            except ZynMLError as err:
                results[device] = {"error": err.render()}
            except Exception as err:  # a device that breaks must not hide the others
                results[device] = {"error": f"{type(err).__name__}: {err}"}
        self.results = results
        self.mode.value = "compare"
        self._render()
        return results

    def _notebook_env(self, source: str) -> dict:
        """The values `source` reads, and the globals of the pipelines it calls (a pipeline
        runs on the session that calls it): the session's, and the notebook's where Python
        holds them now (rebound since a cell bound them)."""
        from ..kernel import cells

        namespace = self._session().namespace
        try:
            env = cells.notebook_values(source, namespace, namespace)
        except ZynMLError:          # (each device's run says what is wrong)
            return {}
        shell = _ipython() if self.session is None else None
        if shell is not None:
            user_ns, hidden = shell.user_ns, getattr(shell, "user_ns_hidden", {})
            python = cells.notebook_values(source, namespace, user_ns, hidden)
            for name in [n for n in env if n not in python and not n.startswith("_")
                         and n not in hidden and not cells.ipython_name(n)]:
                # Python deleted it (`del x`): the name is unknown, as in the next cell; or
                # rebound it to a value ZynML cannot use: the run says why
                if name in user_ns:
                    env[name] = user_ns[name]
                else:
                    del env[name]
            # (but the array of the session's own tensor: a bf16 one Python holds as f32)
            env.update({k: v for k, v in python.items()
                        if getattr(namespace.get(k), "data", None) is not v})
        return env

    @classmethod
    def compare(cls, source: str, devices=None, env=None, repeat: int = 5, session=None):
        widget = cls(launches=[], session=session)
        widget.run_compare(source, devices, env, repeat)
        return widget
