"""The embedded broker: kombu's filesystem transport, made safe for several processes.

kombu's filesystem channel writes a message straight into its final name, and a consumer polling
the folder can take the file before the writer has finished it (seen as an empty message that
kills the Celery worker with ``JSONDecodeError``); and it claims a message by moving it to the
system's temp folder, which on another filesystem is a copy, so two consumers may both get it.
Here a message is written under a temporary name and renamed into place (atomic), and claimed
by renaming it into the processed folder next to the queue (atomic: exactly one consumer wins).
Names start with a zero-padded nanosecond clock (kombu's: milliseconds, so messages sent within
one millisecond came out in random order), keeping each queue first in, first out.

A consumer waiting for messages wakes when one arrives rather than when its next poll comes
(kombu's loop sleeps ``polling_interval`` after every empty look): the queue folder is watched
with inotify (``inotify_simple``), and the process's own acknowledgement (which lets it take its
next message, already there) wakes it too; it looks anyway every :data:`WATCH_FALLBACK_S`. Where
inotify cannot be had it polls as kombu does. A message put back (its worker lost) is marked
``redelivered`` in its delivery information, as Redis marks it, so its runner asks before it runs it.
"""

from __future__ import annotations

import itertools
import logging
import os
import select
import socket
import uuid
from queue import Empty
from time import monotonic, monotonic_ns
from typing import Any

from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads


log = logging.getLogger("kernelrank.fsbroker")

_sequence = itertools.count()
#: Seconds a waiting consumer sleeps at most without a wake-up: a message whose file event was
#: missed (a folder shared with another machine) is still taken.
WATCH_FALLBACK_S = 1.0


def message_name(queue: str) -> str:
    """``<monotonic ns, 20 digits>-<sequence>_<uuid>.<queue>.msg``: sorts in sending order."""
    return f"{monotonic_ns():020d}-{next(_sequence) % 1_000_000:06d}_{uuid.uuid4()}.{queue}.msg"


class Channel(filesystem.Channel):
    """Filesystem channel with atomic publish and claim (same folder layout as kombu's)."""

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        name = message_name(queue)
        # the temporary name has no ".<queue>.msg" suffix: no consumer picks it up
        tmp = os.path.join(self.data_folder_out, f"{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(tmp, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise filesystem.ChannelError(f"cannot add message {name!r} to {self.data_folder_out!r}") from exc

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        suffix = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != suffix:
                continue
            claimed = os.path.join(self.processed_folder, name)
            try:
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except OSError:  # another consumer claimed it first
                continue
            try:
                with open(claimed, "rb") as f:
                    payload = f.read()
            finally:
                if not self.store_processed:
                    try:
                        os.unlink(claimed)
                    except OSError:
                        pass
            return loads(bytes_to_str(payload))
        raise Empty()

    def _restore(self, message: Any) -> None:
        """Put a message back in its queue (its worker was lost), marked ``redelivered``."""
        info = message.delivery_info
        payload = message.serializable()
        payload["redelivered"] = True
        properties = payload["properties"]
        payload["properties"] = {**properties, "delivery_info": {**(properties.get("delivery_info") or {}),
                                                                 "redelivered": True}}
        for queue in self._lookup(info["exchange"], info["routing_key"]):
            self._put(queue, payload)

    # an acknowledgement, a rejection or a new prefetch may let the consumer take a message that
    # is already in the folder (no file event comes): wake it
    def _wake(self) -> None:
        wake = getattr(self.connection, "wake", None)  # None once the channel is closed
        if wake is not None:
            wake()

    def basic_ack(self, delivery_tag: Any, multiple: bool = False) -> None:
        super().basic_ack(delivery_tag, multiple)
        self._wake()

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        super().basic_reject(delivery_tag, requeue)
        self._wake()

    def basic_qos(self, *args: Any, **kwargs: Any) -> None:
        super().basic_qos(*args, **kwargs)
        self._wake()


class Wakeup:
    """What wakes a consumer waiting for messages: a file renamed into the queue ``folder`` (every
    message arrives so, :meth:`Channel._put`), or :meth:`wake` (from any thread).

    Raises:
        OSError: inotify cannot be had (no support, or the user's limit of instances reached).
    """

    def __init__(self, folder: str) -> None:
        from inotify_simple import INotify, flags

        self._inotify = INotify(nonblocking=True)
        try:
            self._inotify.add_watch(folder, flags.MOVED_TO)
            self._r, self._w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            self._inotify.close()
            raise
        self._poll = select.poll()
        for fd in (self._inotify.fileno(), self._r):
            self._poll.register(fd, select.POLLIN)

    def wake(self) -> None:
        """Wake the waiter now (or its next wait at once)."""
        try:
            os.write(self._w, b"\0")
        except (BlockingIOError, OSError):  # the pipe is full (a wake-up is pending anyway) or closed
            pass

    def wait(self, timeout_s: float) -> None:
        """Return when woken, or after ``timeout_s`` seconds; what woke it is consumed."""
        if self._poll.poll(max(0, int(timeout_s * 1000))):
            self._inotify.read(timeout=0)
            try:
                while os.read(self._r, 4096):
                    pass
            except BlockingIOError:
                pass

    def close(self) -> None:
        """Release the inotify instance and the pipe."""
        self._inotify.close()
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass


class Transport(filesystem.Transport):
    """``broker_transport = "kernelrank.fsbroker:Transport"`` with a ``filesystem://`` URL."""

    Channel = Channel

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self._wakeup: Wakeup | None = None
        self._wakeup_tried = False

    def wake(self) -> None:
        """Wake this transport's consumer if it waits for messages."""
        if self._wakeup is not None:
            self._wakeup.wake()

    def _waiter(self) -> Wakeup | None:
        """This consumer's :class:`Wakeup`, made on its first wait (producers never make one);
        ``None`` where inotify cannot be had."""
        if not self._wakeup_tried:
            self._wakeup_tried = True
            folder = self.client.transport_options.get("data_folder_in")
            try:
                self._wakeup = Wakeup(folder) if folder else None
            except OSError as e:
                log.warning("the file broker polls every %.2f s: no inotify (%s)", self.polling_interval, e)
        return self._wakeup

    def drain_events(self, connection: Any, timeout: float | None = None) -> None:
        """Deliver one message, waiting at most ``timeout`` seconds (``socket.timeout`` then),
        woken by a new message rather than polling (kombu's loop where inotify is missing)."""
        waiter = self._waiter()
        if waiter is None:
            return super().drain_events(connection, timeout)
        start = monotonic()
        while True:
            try:
                self.cycle.get(self._deliver, timeout=timeout)
                return None
            except Empty:
                left = WATCH_FALLBACK_S if timeout is None else timeout - (monotonic() - start)
                if left <= 0:
                    raise socket.timeout() from None
                waiter.wait(min(left, WATCH_FALLBACK_S))

    def close_connection(self, connection: Any) -> None:
        try:
            super().close_connection(connection)
        finally:
            if self._wakeup is not None:
                self._wakeup.close()
                self._wakeup, self._wakeup_tried = None, False
