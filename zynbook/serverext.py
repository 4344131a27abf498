"""An optional Jupyter server extension: TCP_NODELAY on the server's kernel websockets.

jupyter_server leaves Nagle's algorithm on for the websockets between the server and the
page, so a small message (a `browser:N` launch, a widget update) can wait for the delayed
ACK of the one before it: about 40 ms from the kernel to the page on Linux, most of the
round trip of a small kernel on `browser:0` (bench/bench_browser.py measures it with and
without this). Enable it for one server with

    jupyter lab --ServerApp.jpserver_extensions=zynbook.serverext=True

It changes nothing but the socket option of each kernel websocket as it opens.
"""
from __future__ import annotations

import inspect


def _jupyter_server_extension_points():
    return [{"module": "zynbook.serverext"}]


def nodelay_open(original):
    """`original` (a websocket handler's open) followed by TCP_NODELAY on its socket."""
    async def open_nodelay(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        if inspect.isawaitable(result):
            await result
        try:
            self.set_nodelay(True)
        except Exception:           # a connection that closed while opening
            pass
    return open_nodelay


def _load_jupyter_server_extension(serverapp) -> None:
    from jupyter_server.services.kernels.websocket import KernelWebsocketHandler

    if getattr(KernelWebsocketHandler, "_zynbook_nodelay", False):
        return
    KernelWebsocketHandler.open = nodelay_open(KernelWebsocketHandler.open)
    KernelWebsocketHandler._zynbook_nodelay = True
    serverapp.log.info("zynbook: TCP_NODELAY on kernel websockets")


# older jupyter_server releases look for these names
load_jupyter_server_extension = _load_jupyter_server_extension
