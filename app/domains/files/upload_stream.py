"""Streams a multipart/form-data upload straight into a blob temp file.

Starlette's form parsing spools the whole body before the handler runs, too late for a size
limit; here the file part goes chunk by chunk into the store while its size is checked, so the
body never sits in memory and an oversized upload stops at the limit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from python_multipart import MultipartParser
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import parse_options_header

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

from app.core.errors import InsufficientStorage, InvalidRequest, PayloadTooLarge, is_disk_full
from app.storage.base import BlobWriter

MAX_FIELD_BYTES = 64 * 1024
MAX_FIELDS = 32
# After a limit is hit, the rest of the body (up to this much) is read and dropped so the client
# sees the 413 instead of a connection reset while it is still sending.
DRAIN_LIMIT_BYTES = 1024 * 1024 * 1024


class _LimitExceeded(Exception):
    pass


@dataclass
class ReceivedUpload:
    fields: dict[str, str] = field(default_factory=dict)
    filename: str | None = None
    blob: BlobWriter | None = None


class _Receiver:
    """python-multipart callbacks that route form fields to memory and the file to a blob."""

    def __init__(
        self, new_writer: Callable[[], BlobWriter], limit_for: Callable[[str | None], int], file_field: str = "file"
    ):
        self.new_writer = new_writer
        self.file_field = file_field
        self.limit_for = limit_for
        self.result = ReceivedUpload()
        self._header_name = bytearray()
        self._header_value = bytearray()
        self._headers: dict[bytes, bytes] = {}
        self._field_name: str | None = None
        self._field_value = bytearray()
        self._in_file = False

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": lambda d, s, e: self._header_name.extend(d[s:e]),
            "on_header_value": lambda d, s, e: self._header_value.extend(d[s:e]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
        }

    def _part_begin(self) -> None:
        self._headers = {}
        self._field_name = None
        self._field_value = bytearray()
        self._in_file = False

    def _header_end(self) -> None:
        self._headers[bytes(self._header_name).lower()] = bytes(self._header_value)
        self._header_name.clear()
        self._header_value.clear()

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        name = options.get(b"name", b"").decode("utf-8", "replace")
        if name == self.file_field:
            if self.result.blob is not None:
                raise InvalidRequest(f"Only one '{name}' part is allowed.", param=name)
            self._in_file = True
            self.result.filename = options.get(b"filename", b"").decode("utf-8", "replace")
            self.result.blob = self.new_writer()
        else:
            if len(self.result.fields) >= MAX_FIELDS:
                raise InvalidRequest("Too many form fields.")
            self._field_name = name

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._in_file:
            blob = self.result.blob
            assert blob is not None, "file data comes after its part's headers"
            blob.write(memoryview(data)[start:end])
            if blob.size > self.limit_for(self.result.fields.get("purpose")):
                raise _LimitExceeded
        else:
            self._field_value.extend(data[start:end])
            if len(self._field_value) > MAX_FIELD_BYTES:
                raise InvalidRequest(f"Form field '{self._field_name}' is too long.", param=self._field_name)

    def _part_end(self) -> None:
        if not self._in_file and self._field_name:
            self.result.fields[self._field_name] = self._field_value.decode("utf-8", "replace")
        self._in_file = False


def _boundary(content_type: str) -> bytes:
    kind, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise InvalidRequest("Uploads must be sent as multipart/form-data with a 'file' part.")
    return boundary


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    drained = 0
    async for chunk in chunks:
        drained += len(chunk)
        if drained > DRAIN_LIMIT_BYTES:
            return


async def receive_upload(
    chunks: AsyncIterator[bytes],
    content_type: str,
    new_writer: Callable[[], BlobWriter],
    limit_for: Callable[[str | None], int],
    too_large: Callable[[str | None], PayloadTooLarge],
    file_field: str = "file",
) -> ReceivedUpload:
    """Parse the body; the part named `file_field` ends up in `blob` (a temp file, not yet
    committed). On any error the temp file is removed and nothing else is left behind."""
    receiver = _Receiver(new_writer, limit_for, file_field)
    parser = MultipartParser(_boundary(content_type), receiver.callbacks())
    result = receiver.result
    try:
        async for chunk in chunks:
            parser.write(chunk)
            if result.blob is not None:
                await result.blob.drain()
        parser.finalize()
        if result.blob is not None:
            await result.blob.drain()
        if result.blob is not None and result.blob.size > limit_for(result.fields.get("purpose")):
            raise _LimitExceeded
    except _LimitExceeded:
        if result.blob is not None:
            await result.blob.discard()
        await _drain(chunks)
        raise too_large(result.fields.get("purpose")) from None
    except MultipartParseError as exc:
        if result.blob is not None:
            await result.blob.discard()
        raise InvalidRequest(f"Malformed multipart body: {exc}") from None
    except OSError as exc:
        if result.blob is not None:
            await result.blob.discard()
        if not is_disk_full(exc):
            raise
        # Read the rest so the client gets the 507 rather than a reset connection.
        await _drain(chunks)
        raise InsufficientStorage() from None
    except BaseException:
        if result.blob is not None:
            await result.blob.discard()
        raise
    return result
