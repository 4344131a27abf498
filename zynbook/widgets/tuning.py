"""The progress of an `@autotune` search in a notebook: a bar, the candidate measured last
with its time (or why it was skipped) and the best time so far (zynbook/tuning.py)."""
from __future__ import annotations

import html

import ipywidgets as W


class TuningProgress(W.VBox):
    def __init__(self, kernel: str, device: str, total: int, **kwargs):
        self.title = f"tuning {kernel} on {device}"
        self.bar = W.IntProgress(value=0, min=0, max=max(total, 1), description="tuning",
                                 bar_style="info")
        self.label = W.HTML(f"<code>{html.escape(self.title)}</code>: {total} candidates")
        super().__init__([self.bar, self.label], **kwargs)

    def show(self) -> "TuningProgress":
        from IPython.display import display
        display(self)
        return self

    def update(self, done: int, choice, seconds, best, why: str = ""):
        self.bar.value = done
        took = why or (f"{seconds * 1e3:.3g} ms" if seconds is not None else "")
        best_text = f" · best {best * 1e3:.3g} ms" if best is not None else ""
        self.label.value = (f"<code>{html.escape(choice.describe())}</code>: "
                            f"{html.escape(took)}{html.escape(best_text)}")

    def done(self, choice, seconds: float, tune_s: float):
        self.bar.value = self.bar.max
        self.bar.bar_style = "success"
        self.label.value = (f"tuned in {tune_s:.1f} s: <code>{html.escape(choice.describe())}"
                            f"</code> ({seconds * 1e3:.3g} ms)")
