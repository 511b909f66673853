"""ORM models; importing this package registers every table on Base.metadata."""

from app.db.models.api_key import ApiKey
from app.db.models.batch import ACTIVE_STATUSES, TERMINAL_STATUSES, Batch, BatchLine
from app.db.models.file import File
from app.db.models.served_model import ServedModel
from app.db.models.shard import SHARD_DONE, SHARD_PENDING, SHARD_RUNNING, BatchShard
from app.db.models.upload import Upload, UploadPart
from app.db.models.webhook import WebhookDelivery, WebhookEndpoint, WebhookEvent

__all__ = [
    "ACTIVE_STATUSES",
    "SHARD_DONE",
    "SHARD_PENDING",
    "SHARD_RUNNING",
    "TERMINAL_STATUSES",
    "ApiKey",
    "Batch",
    "BatchLine",
    "BatchShard",
    "File",
    "ServedModel",
    "Upload",
    "UploadPart",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEvent",
]
