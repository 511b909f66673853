"""ORM models; importing this package registers every table on Base.metadata."""

from app.db.models.api_key import ApiKey
from app.db.models.batch import ACTIVE_STATUSES, TERMINAL_STATUSES, Batch, BatchLine
from app.db.models.file import File

__all__ = ["ACTIVE_STATUSES", "TERMINAL_STATUSES", "ApiKey", "Batch", "BatchLine", "File"]
