"""ORM models; importing this package registers every table on Base.metadata."""

from app.db.models.api_key import ApiKey
from app.db.models.audit_log import AuditLog
from app.db.models.batch import Batch, BatchChunk, BatchPromptTokens, new_batch
from app.db.models.file import File
from app.db.models.idempotency_key import IdempotencyKey
from app.db.models.project import Project
from app.db.models.rate_limit import ProjectRateLimit
from app.db.models.served_model import ServedModel
from app.db.models.shard import BatchShard
from app.db.models.upload import Upload, UploadPart
from app.db.models.usage import UsageMinute
from app.db.models.webhook import WebhookDelivery, WebhookEndpoint, WebhookEvent

__all__ = [
    "ApiKey",
    "AuditLog",
    "Batch",
    "BatchChunk",
    "BatchPromptTokens",
    "BatchShard",
    "File",
    "IdempotencyKey",
    "Project",
    "ProjectRateLimit",
    "ServedModel",
    "Upload",
    "UploadPart",
    "UsageMinute",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEvent",
    "new_batch",
]
