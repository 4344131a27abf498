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
        _announced[id(_session)] = _session.default_device
    return _session


def set_notebook_session(session) -> None:
    global _session
    _session = session
    _last.clear()
    if session is not None:
        _announced[id(session)] = session.default_device


def remember(session) -> None:
    """Keep `session`'s last kernels and launches if its last cell compiled any (the lists
    themselves: each cell, and each call of a pipeline from Python, starts new ones)."""
    if _compiled(session):
        _keep(session)


def _compiled(session) -> bool:
    """Whether the last run of `session` compiled a block: launched it, started it
    (`@async`) or failed in its launch."""
    return bool(getattr(session, "last_kernels", None) or getattr(session, "last_async", None)
                or getattr(session, "last_failed", None))


def _keep(session) -> None:
    """Keep the session's lists themselves: an @async block of the cell adds its launch
    to them when it runs (runtime/interp.py, `_recorded_in`)."""
    _last[id(session)] = (session.last_kernels, session.launches,
                          getattr(session, "last_async", None) or [],
                          getattr(session, "last_failed", None) or [])


def after_cell(session) -> None:
    """What follows every ZynML cell of `session`: `remember` its kernels, and
    `announce_device` if the cell changed the default device (`config { compute_device }`);
    a cell that changed neither costs two look-ups."""
    if session.last_kernels or _compiled(session):
        _keep(session)
    if _announced.get(id(session)) is not session.default_device:
        announce_device(session)


def last_run(session=None) -> tuple[list, list]:
    """(kernels, launches) of the last cell of `session` (default: the notebook's) that
    compiled a compute block; ([], []) when none has. A last cell whose `@async` blocks
    have not launched yet, or whose launch failed, is that cell: its kernels so far and
    those blocks' (each with a `note` saying why it has no launch), not an earlier cell's."""
    session = session if session is not None else notebook_session()
    remember(session)
    kernels, launches, started, failed = _last.get(id(session), ([], [], [], []))
    return list(kernels) + running_kernels(kernels, started) + list(failed), list(launches)


def running_kernels(kernels, started) -> list:
    """The kernels of the `@async` blocks `started` ((future, CompiledKernel) each) that
    have not launched yet (CompiledKernels without a launch; `kernels`: those launched)."""
    if not started:
        return []
    launched = {k.name for k in kernels}
    return [k for future, k in started if not future.done() and k.name not in launched]


# --------------------------------------------------------------------- one device state
#
# The default device is shown in three places: DevicePicker widgets, the JupyterLab
# toolbar item and `%device`; `config { compute_device: ... }` and `%device` set it too.
# Whatever sets it calls `announce_device`, which updates every live picker of the session
# and tells the front end through a comm (target `zynbook.device`, data {"default": id}),
# so the toolbar follows without a cell being run.

COMM_TARGET = "zynbook.device"
_pickers: "weakref.WeakSet" = None      # made on first use
_announced: dict = {}                   # id(session) -> the default last announced
_UNSEEN = object()


def register_picker(picker) -> None:
    global _pickers
    import weakref

    if _pickers is None:
        _pickers = weakref.WeakSet()
    _pickers.add(picker)
    session = getattr(picker, "session", None)
    if session is not None:
        _announced.setdefault(id(session), session.default_device)


def announce_device(session=None, force: bool = False) -> bool:
    """Tell every picker and the front end the session's default device if it changed since
    the last announcement (or `force`); True if it was announced."""
    session = session if session is not None else notebook_session()
    device = session.default_device
    last = _announced.get(id(session), _UNSEEN)
    if not force:
        if last is device:
            return False
        if last == device:
            _announced[id(session)] = device    # (`after_cell` compares by identity)
            return False
        if last is _UNSEEN:
            # the first time a session is seen: nothing has changed yet
            _announced[id(session)] = device
            return False
    _announced[id(session)] = device
    for picker in list(_pickers or ()):
        if getattr(picker, "session", None) is session:
            try:
                picker.show_device(device)
            except Exception:  # a closed widget must not stop the others
                pass
    _send_to_frontend({"default": device})
    return True


def _send_to_frontend(data: dict) -> None:
    """Open (and close) a comm carrying `data`, when running in a Jupyter kernel."""
    try:
        from IPython import get_ipython

        ip = get_ipython()
        if ip is None or getattr(ip, "kernel", None) is None:
            return
        from comm import create_comm

        c = create_comm(target_name=COMM_TARGET, data=data)
        c.close()
    except Exception:  # no front end to tell: nothing to do
        pass
