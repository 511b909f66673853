"""An audio line as the multipart form ``POST {url}/audio/transcriptions`` (or
``/audio/translations``) takes: the body's fields as form fields, the fetched audio as ``file``.

Rendered to bytes once, so a retried attempt sends the very same request.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson


def audio_form(body: dict[str, Any], audio: bytes) -> tuple[bytes, str]:
    """``(payload, content type)`` for ``body`` (a batch line's, ``file_url`` dropped)."""
    boundary = f"batchd-{uuid.uuid4().hex}"
    parts: list[bytes] = []
    for name, value in body.items():
        if name == "file_url" or value is None:
            continue
        # Lists go as repeated fields (as the OpenAI client sends timestamp_granularities[]).
        for item in value if isinstance(value, list) else [value]:
            parts.append(_field(boundary, f"{name}[]" if isinstance(value, list) else name, _text(item)))
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="audio.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + audio
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _field(boundary: str, name: str, value: str) -> bytes:
    return f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return orjson.dumps(value).decode()
    return str(value)
