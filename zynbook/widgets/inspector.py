"""The shader inspector: a compute block's ZynML, CIR and generated code, side by side."""
from __future__ import annotations

import ipywidgets as W

from ..highlight import highlight_css
from ..kernel.codeview import mapped_html, plain_html
from ..kernel.display import STAGES, default_language, kernel_label, kernel_sections
from ..kernel.state import last_run, notebook_session
from .views import TAB_TITLES, launch_info_html, tab_title  # noqa: F401


class ShaderInspector(W.VBox):
    """Tabs for ZynML source, CIR and every generated source of a compiled kernel.

    `kernels`: CompiledKernels (default: the session's `last_kernels`); `launches`: the
    launches to take device and geometry from (default: the session's `launches`)."""

    def __init__(self, kernels=None, launches=None, session=None, **kwargs):
        self.session = session
        self.picker = W.Dropdown(description="Kernel", style={"description_width": "60px"})
        self.info = W.HTML()
        self.tabs = W.Tab()
        super().__init__([self.picker, self.info, self.tabs], **kwargs)
        self._updating = False
        self.picker.observe(self._on_pick, names="value")
        self.update(kernels, launches)

    def _session(self):
        return self.session if self.session is not None else notebook_session()

    def update(self, kernels=None, launches=None) -> None:
        """Show `kernels` (default: the session's last ones)."""
        if kernels is None:
            # the last cell that ran compute blocks (a failed cell after it keeps them)
            kernels, last_launches = last_run(self._session())
            if launches is None:
                launches = last_launches
        self.kernels = list(kernels)
        self.launches = list(launches or [])
        try:
            from .. import compute_devices

            self.devices = {d["id"]: d for d in compute_devices()}
        except Exception:  # device discovery failing must not hide the code
            self.devices = {}
        namespace = getattr(self._session(), "namespace", {})
        names = [k.name + (f" = {label}" if (label := kernel_label(k, namespace)) else "")
                 for k in self.kernels]
        self.picker.layout.display = "" if len(names) > 1 else "none"
        self._updating = True
        try:
            self.picker.options = [(n, i) for i, n in enumerate(names)]
            self.picker.value = 0 if names else None
        finally:
            self._updating = False
        self._show(0 if names else None)

    def _on_pick(self, change) -> None:
        if not self._updating:
            self._show(change["new"])

    def _show(self, index) -> None:
        if index is None or not self.kernels:
            self.info.value = "<i>No compute block has run yet.</i>"
            self.tabs.children = []
            return
        kernel = self.kernels[index]
        self.info.value = launch_info_html(kernel, self.launches, self.devices)
        sections = kernel_sections(kernel)
        self.sections = dict(sections)
        zynml = self.sections.get("zynml", "")
        first = getattr(getattr(kernel, "kernel", None), "first_line", 0) or 1
        style = f"<style>{highlight_css()}</style>"
        pages = []
        for lang, text in sections:
            if lang == "zynml":
                page = mapped_html("", first, text, "zynml", title="ZynML", fold_helpers=False)
                # the block's own line numbers
                page = page if text else "<i>No ZynML text for this block.</i>"
            elif lang in STAGES:
                page = plain_html(text, lang, title=tab_title(lang))
            else:
                page = mapped_html(zynml, first, text, lang, title=tab_title(lang))
            pages.append(W.HTML(style + page, layout=W.Layout(width="100%")))
        self.tabs.children = pages
        self.tabs.titles = [tab_title(lang) for lang, _ in sections]
        generated = {k: v for k, v in sections if k not in STAGES}
        lang = default_language(kernel, self.launches, generated)
        names = [lang_ for lang_, _ in sections]
        if lang in names:
            self.tabs.selected_index = names.index(lang)
