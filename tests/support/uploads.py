"""A file upload sent by hand over a raw socket, so a test can stop mid-body (a client that
disconnects) at a byte count it chooses."""

from __future__ import annotations

BOUNDARY = "b0undary"
_PARTS_HEAD = (
    f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n'
    f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n'
    "Content-Type: application/octet-stream\r\n\r\n"
).encode()


def upload_head(file_bytes: int, api_key: str = "any") -> bytes:
    """HTTP request line, headers and multipart head of a `POST /v1/files` whose file part is
    announced as `file_bytes` long; the file's bytes are the caller's to send (or not)."""
    return (
        "POST /v1/files HTTP/1.1\r\nHost: localhost\r\n"
        f"Authorization: Bearer {api_key}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {len(_PARTS_HEAD) + file_bytes}\r\n\r\n"
    ).encode() + _PARTS_HEAD
