"""The notebook's ZynML session: one `zynbook.Session` shared by the ZynML kernel, the
`%%compute` magics and the widgets of one kernel process, so that a device picked in a
widget is the device the next cell runs on."""
from __future__ import annotations

_session = None


def notebook_session():
    """The session of this notebook, made on first use."""
    global _session
    if _session is None:
        from .. import Session

        _session = Session()
    return _session


def set_notebook_session(session) -> None:
    global _session
    _session = session
