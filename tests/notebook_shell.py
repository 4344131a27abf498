"""The IPython shell the notebook tests drive: the `zynbook` extension loaded over a
notebook session on the reference cpu, and the names a test file's cells bind cleared
before and after each test; `cell` runs one cell and returns its value."""
from __future__ import annotations

import pytest

import zynbook


def _start():
    from IPython.core.interactiveshell import InteractiveShell

    from zynbook.kernel import state
    sh = InteractiveShell.instance()
    state.set_notebook_session(zynbook.Session(device="cpu"))
    sh.run_line_magic("load_ext", "zynbook")
    return sh


def _stop():
    from zynbook.kernel import state
    state.set_notebook_session(None)


def shell_fixture(names: tuple):
    """A pytest fixture of the shell, clearing `names` from the user namespace."""
    @pytest.fixture
    def shell():
        sh = _start()
        for name in names:
            sh.user_ns.pop(name, None)
        yield sh
        for name in names:
            sh.user_ns.pop(name, None)
        _stop()
    return shell


@pytest.fixture
def shell():
    """The shell, the names a test's cells bind removed after it (`from notebook_shell import
    shell` in a test file)."""
    pytest.importorskip("IPython")
    sh = _start()
    names = set(sh.user_ns)
    yield sh
    for name in set(sh.user_ns) - names:
        sh.user_ns.pop(name, None)
    _stop()


def cell(shell, text):
    result = shell.run_cell(text)
    assert result.success, result.error_in_exec
    return result.result


@pytest.fixture(scope="module")
def kc():
    """A ZynML kernel for the module's tests (test_kernel_support.kernel_client)."""
    pytest.importorskip("ipykernel")
    from test_kernel_support import kernel_client

    yield from kernel_client()
