"""The embedded broker: kombu's filesystem transport, made safe for several processes.

kombu's filesystem channel writes a message straight into its final name, and a consumer polling
the folder can take the file before the writer has finished it (seen as an empty message that
kills the Celery worker with ``JSONDecodeError``); and it claims a message by moving it to the
system's temp folder, which on another filesystem is a copy, so two consumers may both get it.
Here a message is written under a temporary name and renamed into place (atomic), and claimed
by renaming it into the processed folder next to the queue (atomic: exactly one consumer wins).
Names start with a zero-padded nanosecond clock (kombu's: milliseconds, so messages sent within
one millisecond came out in random order), keeping each queue first in, first out.
"""

from __future__ import annotations

import itertools
import os
import uuid
from queue import Empty
from time import monotonic_ns
from typing import Any

from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads


_sequence = itertools.count()


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


class Transport(filesystem.Transport):
    """``broker_transport = "kernelrank.fsbroker:Transport"`` with a ``filesystem://`` URL."""

    Channel = Channel
