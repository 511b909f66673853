"""Wire shapes of OpenAI's Administration API (`/v1/organization/...`) for what batchd has:
projects, their service accounts and API keys, admin API keys and the audit log."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

# Text a database can store (Postgres' has no NUL), with something besides spaces.
NO_NUL = "^[^\\x00]*$"
Name = Annotated[str, Field(min_length=1, max_length=256, pattern="^[^\\x00]*[^\\s\\x00][^\\x00]*$")]


# -- projects ---------------------------------------------------------------------------------


class ProjectCreateParams(BaseModel):
    """`admin.organization.projects.create`; OpenAI's residency fields are accepted and ignored
    (one host has one residency)."""

    model_config = ConfigDict(extra="allow")

    name: Name


RetentionDays = Annotated[int, Field(ge=1, le=36_500)]


class ProjectUpdateParams(BaseModel):
    """A new display name; batchd's `retention_days` (extra_body): the project's files and batch
    outputs are deleted that many days after they were made, null turns it off (absent: kept);
    batchd's `allowed_import_uris`: the `s3://bucket/prefix/` URIs its files may be imported from
    (replaces the list; null or [] clears it)."""

    model_config = ConfigDict(extra="allow")

    name: Name | None = None
    retention_days: RetentionDays | None = None
    allowed_import_uris: list[str] | None = None


class ProjectBatchesPaused(BaseModel):
    """batchd's: what pausing (or resuming) every running batch of a project changed."""

    object: Literal["organization.project.batches"] = "organization.project.batches"
    project_id: str
    paused: bool
    batches: int  # how many running batches were paused (or resumed) by this call


class ProjectObject(BaseModel):
    object: Literal["organization.project"] = "organization.project"
    id: str
    name: str
    created_at: int
    archived_at: int | None
    status: Literal["active", "archived"]
    # batchd's: days after which the project's files and batch outputs are deleted (None: never).
    retention_days: int | None = None
    # batchd's: the S3 prefixes its files may be imported from, besides the server-wide ones.
    allowed_import_uris: list[str] = Field(default_factory=list, exclude_if=lambda value: not value)


# -- service accounts and keys ----------------------------------------------------------------


class ServiceAccountCreateParams(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: Name


class ServiceAccountObject(BaseModel):
    object: Literal["organization.project.service_account"] = "organization.project.service_account"
    id: str
    name: str
    role: Literal["member"] = "member"
    created_at: int


class ServiceAccountKey(BaseModel):
    """The key a new service account gets: its value is shown this once."""

    object: Literal["organization.project.service_account.api_key"] = "organization.project.service_account.api_key"
    id: str
    name: str
    value: str
    created_at: int


class ServiceAccountCreated(ServiceAccountObject):
    api_key: ServiceAccountKey


class ServiceAccountDeleted(BaseModel):
    object: Literal["organization.project.service_account.deleted"] = "organization.project.service_account.deleted"
    id: str
    deleted: Literal[True] = True


class KeyOwnerServiceAccount(BaseModel):
    id: str
    name: str
    role: Literal["member"] = "member"
    created_at: int


class KeyOwner(BaseModel):
    type: Literal["service_account"] = "service_account"
    service_account: KeyOwnerServiceAccount


class ProjectApiKeyObject(BaseModel):
    object: Literal["organization.project.api_key"] = "organization.project.api_key"
    id: str
    name: str
    redacted_value: str
    created_at: int
    last_used_at: int | None = None
    owner: KeyOwner
    owner_project_access: Literal["active", "inactive"]


class ProjectApiKeyDeleted(BaseModel):
    object: Literal["organization.project.api_key.deleted"] = "organization.project.api_key.deleted"
    id: str
    deleted: Literal[True] = True


class AdminKeyCreateParams(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: Name


class AdminKeyOwner(BaseModel):
    """Admin keys here belong to the organization itself, not to a user."""

    type: Literal["organization"] = "organization"
    object: Literal["organization"] = "organization"
    id: str = "org-batchd"
    name: str = "batchd"


class AdminKeyObject(BaseModel):
    object: Literal["organization.admin_api_key"] = "organization.admin_api_key"
    id: str
    name: str | None
    redacted_value: str
    created_at: int
    expires_at: int | None = None
    last_used_at: int | None = None
    owner: AdminKeyOwner = AdminKeyOwner()


class AdminKeyCreated(AdminKeyObject):
    value: str


class AdminKeyDeleted(BaseModel):
    object: Literal["organization.admin_api_key.deleted"] = "organization.admin_api_key.deleted"
    id: str
    deleted: Literal[True] = True


# -- audit log --------------------------------------------------------------------------------


class AuditActorKey(BaseModel):
    id: str | None
    type: Literal["service_account"] = "service_account"
    service_account: dict[str, str | None]


class AuditActor(BaseModel):
    type: Literal["api_key"] = "api_key"
    api_key: AuditActorKey


class AuditProject(BaseModel):
    id: str
    name: str | None = None


class AuditLogObject(BaseModel):
    """One event; its details sit under a key named as its type (`"project.created": {...}`)."""

    model_config = ConfigDict(extra="allow")

    object: Literal["organization.audit_log"] = "organization.audit_log"
    id: str
    type: str
    effective_at: int
    actor: AuditActor | None
    project: AuditProject | None


# -- rate limits ------------------------------------------------------------------------------

Limit = Annotated[int, Field(ge=0, le=2**62)]


class RateLimitObject(BaseModel):
    """OpenAI's `project.rate_limit` for one served model. batchd limits per UTC day, not per
    minute (the per-minute fields read 0: no limit). `weight` and `max_enqueued_tokens` are
    batchd's own project-wide knobs (fair share, and the enqueued prompt tokens per model; None:
    the server's default), carried on every model's object."""

    object: Literal["project.rate_limit"] = "project.rate_limit"
    id: str
    model: str
    max_requests_per_1_minute: int = 0
    max_tokens_per_1_minute: int = 0
    batch_1_day_max_input_tokens: int | None
    max_requests_per_1_day: int | None
    weight: int
    max_enqueued_tokens: int | None


class RateLimitUpdateParams(BaseModel):
    """What is given changes (null: no limit). The per-minute limits OpenAI has are refused
    (batchd has none); `weight` and `max_enqueued_tokens` (extra_body) change the project's."""

    model_config = ConfigDict(extra="allow")

    batch_1_day_max_input_tokens: Limit | None = None
    max_requests_per_1_day: Limit | None = None
    weight: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    max_enqueued_tokens: Limit | None = None


# -- model permissions ------------------------------------------------------------------------

PermissionMode = Literal["allow_list", "deny_list"]


class ModelPermissionsParams(BaseModel):
    model_config = ConfigDict(extra="allow")

    mode: PermissionMode
    model_ids: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=256, pattern=NO_NUL)]], Field(max_length=1000)
    ]


class ModelPermissionsObject(BaseModel):
    """Which models the project's batches may name (a deny_list of none: every model)."""

    object: Literal["project.model_permissions"] = "project.model_permissions"
    mode: PermissionMode
    model_ids: list[str]


class ModelPermissionsDeleted(BaseModel):
    object: Literal["project.model_permissions.deleted"] = "project.model_permissions.deleted"
    deleted: Literal[True] = True
