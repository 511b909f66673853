"""Finding a project's object by id, or OpenAI's 404 for it, written once: each kind of object
says how its unknown ids are worded (`No such File object: file-abc`), and the same words
answer a list's unknown `after` cursor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

from app.core.errors import NotFound

Row = TypeVar("Row", covariant=True)


class Repository(Protocol[Row]):
    """What get_or_404 needs of a repository (ProjectScopedRepository has it)."""

    async def get(self, project: str, row_id: str) -> Row | None: ...


@dataclass(frozen=True, slots=True)
class Resource:
    """How the API names one kind of object in its 404s."""

    name: str  # "File object": the message reads "No such File object: <id>"
    param: str | None = None  # the parameter that carries the id
    code: str | None = None

    def not_found(self, object_id: str | None, *, param: str | None = None) -> NotFound:
        """The 404 for `object_id` (given as `param`, by default the id's own parameter)."""
        return NotFound(f"No such {self.name}: {object_id}", param=param or self.param, code=self.code)


async def get_or_404(repo: Repository[Row], project: str, object_id: str, resource: Resource) -> Row:
    """The project's object `object_id`; another project's, or none, is a 404."""
    row = await repo.get(project, object_id)
    if row is None:
        raise resource.not_found(object_id)
    return row


FILE = Resource("File object", "id")
BATCH = Resource("Batch object", "batch_id", "batch_not_found")
MESSAGE_BATCH = Resource("Message Batch", "message_batch_id")
RESPONSE = Resource("response", "response_id")
SINGLE_REQUEST = Resource("single request")
UPLOAD = Resource("Upload object", "upload_id")
WEBHOOK_ENDPOINT = Resource("webhook endpoint")
