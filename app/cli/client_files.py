"""`batchd files upload | list | get | download | delete`: the Files API of any OpenAI-compatible server."""

from __future__ import annotations

import argparse
import mimetypes
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from app.cli.client_common import add_client_flags, command, emit

if TYPE_CHECKING:
    import openai
    from openai.types import FilePurpose

# One request takes a file up to this size (batchd's default limit for batch files; OpenAI's is
# 512 MB); a larger one goes through the Uploads API in parts of PART_SIZE (both take 64 MB parts).
SINGLE_UPLOAD_LIMIT = 200 * 1024 * 1024
PART_SIZE = 64 * 1024 * 1024
PURPOSES = ("batch", "assistants", "fine-tune", "vision", "user_data", "evals")


def upload(client: openai.OpenAI, path: Path, purpose_name: str) -> Any:
    """The file object of `path` uploaded: in one request, or in parts past SINGLE_UPLOAD_LIMIT."""
    purpose = cast("FilePurpose", purpose_name)  # argparse's choices are PURPOSES
    size = path.stat().st_size
    if size <= SINGLE_UPLOAD_LIMIT:
        with path.open("rb") as data:
            return client.files.create(file=(path.name, data), purpose=purpose)
    mime = "text/jsonl" if path.suffix == ".jsonl" else mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    done = client.uploads.upload_file_chunked(
        file=path,
        mime_type=mime,
        purpose=purpose,
        bytes=size,
        part_size=PART_SIZE,
    )
    if done.file is None:
        raise OSError(f"upload {done.id} of {path} ended {done.status} without a file")
    return done.file


def download(client: openai.OpenAI, file_id: str | None, path: Path) -> None:
    """The file's bytes streamed to `path`; no file (a batch with no such lines) writes an empty one."""
    if file_id is None:
        path.write_bytes(b"")
        return
    with client.files.with_streaming_response.content(file_id) as response:
        response.stream_to_file(path)


def _when(seconds: int | None) -> str:
    return "-" if seconds is None else datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _line(file: Any) -> str:
    return f"{file.id}  {file.purpose}  {file.bytes} bytes  {_when(file.created_at)}  {file.filename}"


@command
def _upload(args: argparse.Namespace, client: openai.OpenAI) -> int:
    file = upload(client, args.file, args.purpose)
    emit(args, file, file.id)
    return 0


@command
def _list(args: argparse.Namespace, client: openai.OpenAI) -> int:
    options: dict[str, Any] = {"purpose": args.purpose} if args.purpose else {}
    files = list(client.files.list(**options))
    emit(args, files, [_line(f) for f in files])
    return 0


@command
def _get(args: argparse.Namespace, client: openai.OpenAI) -> int:
    file = client.files.retrieve(args.file_id)
    emit(args, file, _line(file))
    return 0


@command
def _download(args: argparse.Namespace, client: openai.OpenAI) -> int:
    if str(args.output) == "-":
        sys.stdout.buffer.write(client.files.content(args.file_id).content)
        sys.stdout.flush()
    else:
        download(client, args.file_id, args.output)
    return 0


@command
def _delete(args: argparse.Namespace, client: openai.OpenAI) -> int:
    deleted = client.files.delete(args.file_id)
    emit(args, deleted, f"{deleted.id} deleted")
    return 0


def add_parser(commands) -> None:
    files = commands.add_parser("files", help="the Files API of a server (OPENAI_BASE_URL, OPENAI_API_KEY)")
    sub = files.add_subparsers(dest="files_command", required=True)
    upload_ = sub.add_parser(
        "upload", help="upload a file and print its id (past 200 MB in parts, through the Uploads API)"
    )
    upload_.add_argument("file", type=Path, metavar="FILE")
    upload_.add_argument("--purpose", default="batch", choices=PURPOSES, help="default: batch")
    upload_.set_defaults(func=_upload)
    list_ = sub.add_parser("list", help="files, one a line: id, purpose, size, created (UTC), name")
    list_.add_argument("--purpose", choices=PURPOSES, help="only files of this purpose")
    list_.set_defaults(func=_list)
    get = sub.add_parser("get", help="one file's object")
    get.add_argument("file_id", metavar="ID")
    get.set_defaults(func=_get)
    download_ = sub.add_parser("download", help="a file's bytes to a path (or - for stdout)")
    download_.add_argument("file_id", metavar="ID")
    download_.add_argument("-o", "--output", type=Path, required=True, metavar="PATH")
    download_.set_defaults(func=_download)
    delete = sub.add_parser("delete", help="delete a file")
    delete.add_argument("file_id", metavar="ID")
    delete.set_defaults(func=_delete)
    for parser in (upload_, list_, get, download_, delete):
        add_client_flags(parser)
