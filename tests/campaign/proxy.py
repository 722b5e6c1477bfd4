"""A small asyncio TCP proxy between the campaign's clients of PostgreSQL (payledger serve and
the CLI, the standby's and the replica's walreceivers) and the servers' unix sockets, which can
cut, stall, slow or refuse the connections of one link, and move a link to another target
(the new primary after a failover). It runs in a thread of its own; every control is
thread-safe and returns once the loop has applied it."""

import asyncio
import logging
import threading

# Connections still pumping when the campaign ends are dropped with the loop, on purpose.
logging.getLogger("asyncio").setLevel(logging.CRITICAL)


class Link:
    def __init__(self, name, port, target):
        self.name = name
        self.port = port
        self.target = target          # a unix socket path, or (host, port)
        self.conns = set()            # (reader-side writer, upstream writer) pairs
        self.flowing = None           # asyncio.Event, set while data may pass
        self.delay = 0.0              # seconds added before each chunk is forwarded
        self.refusing = False
        self.accepted = 0
        self.server = None


class Proxy:
    def __init__(self, log):
        self.log = log
        self.links = {}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="proxy", daemon=True)
        self.thread.start()

    def _call(self, coro_or_fn, *args):
        if asyncio.iscoroutinefunction(coro_or_fn):
            return asyncio.run_coroutine_threadsafe(coro_or_fn(*args), self.loop).result(30)

        async def wrapper():
            return coro_or_fn(*args)
        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result(30)

    # --- control (any thread) -------------------------------------------------------------
    def add(self, name, port, target):
        return self._call(self._add, name, port, target)

    def cut(self, name):
        """Resets every open connection of the link now (new ones are accepted)."""
        return self._call(self._cut, name)

    def stall(self, name, on):
        """While on, nothing passes in either direction; connections stay open."""
        return self._call(self._stall, name, on)

    def slow(self, name, seconds):
        self._call(self._set, name, "delay", seconds)

    def refuse(self, name, on):
        """While on, a new connection is closed at once."""
        self._call(self._set, name, "refusing", on)

    def retarget(self, name, target):
        """New connections go to `target`; the open ones are cut."""
        self._call(self._set, name, "target", target)
        self.cut(name)

    def heal(self, name):
        self.slow(name, 0.0)
        self.refuse(name, False)
        self.stall(name, False)

    def stop(self):
        async def close_all():
            for link in self.links.values():
                link.server.close()
                self._cut(link.name)
        try:
            self._call(close_all)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)

    # --- the loop's side ------------------------------------------------------------------
    def _set(self, name, attr, value):
        setattr(self.links[name], attr, value)

    def _stall(self, name, on):
        if on:
            self.links[name].flowing.clear()
        else:
            self.links[name].flowing.set()

    def _cut(self, name):
        link = self.links[name]
        n = len(link.conns)
        for pair in list(link.conns):
            for writer in pair:
                if writer is None:
                    continue
                try:
                    sock = writer.get_extra_info("socket")
                    if sock is not None:
                        # SO_LINGER 0: a reset, as a broken network or a dead host gives.
                        import socket
                        import struct
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                        struct.pack("ii", 1, 0))
                    writer.transport.abort()
                except OSError:
                    pass  # Gone already: nothing left to reset.
        link.conns.clear()
        return n

    async def _add(self, name, port, target):
        link = Link(name, port, target)
        link.flowing = asyncio.Event()
        link.flowing.set()
        link.server = await asyncio.start_server(
            lambda r, w: self._serve(link, r, w), "127.0.0.1", port, reuse_address=True)
        self.links[name] = link

    async def _serve(self, link, client_reader, client_writer):
        link.accepted += 1
        if link.refusing:
            client_writer.transport.abort()
            return
        try:
            if isinstance(link.target, str):
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_unix_connection(link.target), 10)
            else:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection(*link.target), 10)
        except OSError:  # Refused, unreachable, or no answer within 10 s (TimeoutError).
            client_writer.transport.abort()
            return
        pair = (client_writer, up_writer)
        link.conns.add(pair)
        try:
            await asyncio.gather(self._pump(link, client_reader, up_writer),
                                 self._pump(link, up_reader, client_writer))
        except OSError:
            pass  # One side reset or broke the link: the pair is closed below.
        finally:
            link.conns.discard(pair)
            for writer in pair:
                writer.close()  # Idempotent, and never raises.

    async def _pump(self, link, reader, writer):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if not link.flowing.is_set():
                    await link.flowing.wait()
                if link.delay > 0:
                    await asyncio.sleep(link.delay)
                if writer.is_closing():
                    break
                writer.write(data)
                await writer.drain()
        finally:
            try:
                if writer.can_write_eof():
                    writer.write_eof()
            except OSError:
                pass  # The peer went first: closed below all the same.
            writer.close()  # Idempotent, and never raises.
