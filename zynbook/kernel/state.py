"""The notebook's ZynML session: one `zynbook.Session` shared by the ZynML kernel, the
`%%compute` magics and the widgets of one kernel process, so that a device picked in a
widget is the device the next cell runs on.

A session forgets what its last cell compiled when the next cell starts, so a cell that fails
before it launches anything would leave the inspector with nothing to show. `remember`
(called after every ZynML cell) keeps the kernels and launches of the last cell that ran a
compute block; `last_run` hands them back."""
from __future__ import annotations

_session = None
_last: dict = {}            # id(session) -> (kernels, launches) of its last cell with kernels


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
    _last.clear()


def remember(session) -> None:
    """Keep `session`'s last kernels and launches if its last cell compiled any."""
    kernels = list(getattr(session, "last_kernels", None) or [])
    if kernels:
        _last[id(session)] = (kernels, list(getattr(session, "launches", None) or []))


def last_run(session=None) -> tuple[list, list]:
    """(kernels, launches) of the last cell of `session` (default: the notebook's) that
    compiled a compute block; ([], []) when none has."""
    session = session if session is not None else notebook_session()
    remember(session)
    return _last.get(id(session), ([], []))
