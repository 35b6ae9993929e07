"""An inference server: the Open Inference Protocol (KServe v2 / Triton) over HTTP (Starlette on
uvicorn) and gRPC (grpc.aio), both on one asyncio event loop, over a repository of models ×
versions, each a `Service` (session, batcher lanes, scheduler). Requests await the batcher's
futures, so one process serves many concurrent requests without a thread each.

    server = InferenceServer(ModelRepository.load(["model.ixa"]), port=8000, grpc_port=8001)
    server.start()            # in a background thread; returns once both ports listen
    ...                       # or server.serve_forever() in this thread (SIGTERM/SIGINT stop it)
    server.shutdown()         # stop accepting, drain in-flight requests, close the services

Endpoints: http_app.py (and its /openapi.json), grpc_server.py; status codes, metrics and
checks: protocol.py, serving_metrics.py. Several servers can share the ports from separate
processes (`reuse_port=True`, SO_REUSEPORT: the kernel spreads connections), as
`inferx-serve --workers N` runs them, with `multiprocess_metrics=True`.

Shutdown (SIGTERM, `stop()`): readiness turns false, the listeners close, requests already
received are answered (up to `graceful_timeout_s`), idle keep-alive connections are closed,
gRPC calls in progress finish (same grace), then every service's batcher drains its queue.
Slow clients: a request body must arrive within `read_timeout_s` (else 408 and the connection
closes); idle keep-alive connections close after `keep_alive_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from typing import Callable, Optional

from inferx_compiler.runtime.http_app import MAX_BODY_BYTES, READ_TIMEOUT_S, HTTPFrontEnd
from inferx_compiler.runtime.protocol import InferenceCore
from inferx_compiler.runtime.repository import ModelRepository
from inferx_compiler.runtime.serving_metrics import ServingMetrics

__all__ = ["InferenceServer", "MAX_BODY_BYTES", "bind_socket", "new_event_loop"]


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where installed (about twice the requests per second), else asyncio's."""
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover
        return asyncio.new_event_loop()


def bind_socket(host: str, port: int, reuse_port: bool = False, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on host:port (port 0: any free one)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class InferenceServer:
    def __init__(self, models, name: Optional[str] = None, host: str = "127.0.0.1", port: int = 8000,
                 grpc_port: Optional[int] = None, *, reuse_port: bool = False, multiprocess_metrics: bool = False,
                 max_body_bytes: int = MAX_BODY_BYTES, read_timeout_s: float = READ_TIMEOUT_S,
                 queue_timeout_s: Optional[float] = None, graceful_timeout_s: float = 30.0,
                 keep_alive_s: float = 5.0, generation=None):
        """`models`: a ModelRepository, or one Service served as model `name`, version 1.
        `generation`: llm_models.GenerationModels, served by the OpenAI-compatible and KServe
        generate endpoints (openai_api.py; the server stops their engines when it ends).
        `grpc_port` None: no gRPC. The HTTP port is bound here (OSError when taken); gRPC's when
        the server starts."""
        self.repository = models if isinstance(models, ModelRepository) else ModelRepository.single(models, name)
        self.generation = generation
        self.metrics = ServingMetrics(multiprocess=multiprocess_metrics)
        self.core = InferenceCore(self.repository, self.metrics, queue_timeout_s=queue_timeout_s)
        routes = ()
        if generation:
            from inferx_compiler.runtime.openai_api import OpenAIFrontEnd
            from inferx_compiler.runtime.serving_metrics import GenerationMetrics

            if multiprocess_metrics:
                raise ValueError("generation models are served by one process (their engines hold the device cache)")
            GenerationMetrics(self.metrics.registry, generation)
            routes = OpenAIFrontEnd(generation).routes()
        self.http = HTTPFrontEnd(self.core, max_body_bytes=max_body_bytes, read_timeout_s=read_timeout_s,
                                 extra_routes=routes)
        self.host, self.reuse_port = host, reuse_port
        self.graceful_timeout_s, self.keep_alive_s = graceful_timeout_s, keep_alive_s
        self.max_body_bytes = max_body_bytes
        self._sock = bind_socket(host, port, reuse_port)
        self.port = self._sock.getsockname()[1]
        self._grpc_requested = grpc_port
        self.grpc_port: Optional[int] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop_event: Optional[asyncio.Event] = None
        self._stop_requested = False
        self._thread: Optional[threading.Thread] = None
        self._ready = threading.Event()
        self._error: Optional[BaseException] = None
        self._closed = False

    @property
    def name(self) -> str:
        return ",".join(self.repository.names() + (self.generation.names() if self.generation else []))

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def grpc_address(self) -> Optional[str]:
        if self.grpc_port is None:
            return None
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.grpc_port}"

    # -- running --------------------------------------------------------------------------
    def start(self) -> "InferenceServer":
        """Serve in a background thread; returns once HTTP and gRPC listen."""
        self._thread = threading.Thread(target=self._run, name="inferx-server", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self

    def serve_forever(self, on_ready: Optional[Callable[["InferenceServer"], None]] = None) -> None:
        """Serve in this thread until `stop()`, SIGTERM or SIGINT (main thread); `on_ready` is
        called once both protocols listen."""
        self._run(on_ready, signals=threading.current_thread() is threading.main_thread())
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Begin a graceful shutdown (any thread); `serve_forever` returns when it is done."""
        self._stop_requested = True
        loop, event = self._loop, self._stop_event
        if loop is not None and event is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(event.set)

    def shutdown(self) -> None:
        """Stop, wait until in-flight requests are answered and the services are closed."""
        self.stop()
        if self._thread is not None:
            self._thread.join()
        if not self._closed:  # never started
            self._closed = True
            self._sock.close()
            self.repository.close()
            if self.generation:
                self.generation.close()

    # -- the loop -------------------------------------------------------------------------
    def _run(self, on_ready=None, signals: bool = False) -> None:
        loop = new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main(on_ready, signals))
        except BaseException as e:  # noqa: BLE001 - reported to start()/serve_forever()
            self._error = e
        finally:
            self._ready.set()
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            asyncio.set_event_loop(None)

    async def _main(self, on_ready, signals: bool) -> None:
        import uvicorn

        loop = asyncio.get_running_loop()
        self._loop, self._stop_event = loop, asyncio.Event()
        if self._stop_requested:
            self._stop_event.set()
        grpc_server = None
        try:
            if self._grpc_requested is not None:
                from inferx_compiler.runtime.grpc_server import grpc_server as make_grpc

                grpc_server, self.grpc_port = make_grpc(self.core, self.host, self._grpc_requested,
                                                        reuse_port=self.reuse_port,
                                                        max_message_bytes=self.max_body_bytes)
                await grpc_server.start()
            config = uvicorn.Config(self.http.app(), http=_http_impl(), loop="none", lifespan="off",
                                    access_log=False, log_config=None, log_level="warning", server_header=False,
                                    proxy_headers=False,
                                    timeout_keep_alive=self.keep_alive_s, backlog=2048,
                                    timeout_graceful_shutdown=self.graceful_timeout_s)
            http = _Uvicorn(config)
            http_task = asyncio.create_task(http.serve(sockets=[self._sock]))
            while not http.started and not http_task.done():
                await asyncio.sleep(0.005)
            if http_task.done():
                http_task.result()
                raise OSError(f"the HTTP server on {self.url} did not start")
            if signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.add_signal_handler(sig, self._stop_event.set)
            self._ready.set()
            if on_ready is not None:
                on_ready(self)
            stop_wait = asyncio.create_task(self._stop_event.wait())
            await asyncio.wait([http_task, stop_wait], return_when=asyncio.FIRST_COMPLETED)
            stop_wait.cancel()
            # drain: not ready any more; listeners close; what was received is answered
            self.core.draining = True
            http.should_exit = True
            waits = [http_task]
            if grpc_server is not None:
                waits.append(asyncio.ensure_future(grpc_server.stop(self.graceful_timeout_s)))
                grpc_server = None
            await asyncio.gather(*waits, return_exceptions=True)
        finally:
            await self.core.aclose()  # what the loop's batchers still hold runs
            self.http.close()
            if grpc_server is not None:
                await grpc_server.stop(None)
            if signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
            self._sock.close()
            self._closed = True
            await loop.run_in_executor(None, self.repository.close)  # batchers drain their queues
            if self.generation:
                await loop.run_in_executor(None, self.generation.close)


class _Uvicorn:
    """uvicorn.Server without its own signal handling (this server handles SIGTERM/SIGINT, and
    uvicorn's would re-raise the signal after shutting down)."""

    def __new__(cls, config):
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self):
                yield

            def install_signal_handlers(self) -> None:  # uvicorn < 0.29
                pass

        return Server(config)


def _http_impl() -> str:
    try:
        import httptools  # noqa: F401

        return "httptools"
    except ImportError:  # pragma: no cover
        return "h11"
