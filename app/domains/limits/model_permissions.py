"""Which served models a project may use (`.../projects/{id}/model_permissions`): an allow list
or a deny list of model ids. A batch line naming a model the project may not use fails
validation as a model that does not exist does, in OpenAI's words for a model a project cannot
use. A Message Batch's requests are checked as they run, each alone (Anthropic's rule, as for a
model not served): one naming such a model ends `errored`, the others run."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import error_envelope
from app.db.engine import Database
from app.db.models import Project
from app.domains.organization.audit_log import record
from app.domains.organization.auth import Caller
from app.domains.organization.org_projects import OrganizationProjects
from app.domains.organization.projects_repository import ProjectRepository
from app.domains.organization.schemas import ModelPermissionsObject, ModelPermissionsParams
from app.engine.protocol import LineChecker, LineRunner
from app.engine.results import MODEL_NOT_FOUND, LineProblem, LineResult
from app.scheduling.residency import NO_DEADLINE, Urgency


def permissions_object(row: Project) -> ModelPermissionsObject:
    if row.model_permissions_mode is None:
        return ModelPermissionsObject(mode="deny_list", model_ids=[])
    return ModelPermissionsObject.model_validate(
        {"mode": row.model_permissions_mode, "model_ids": json.loads(row.model_ids or "[]")}
    )


class ModelPermissions:
    def __init__(self, session: AsyncSession, caller: Caller) -> None:
        self.session = session
        self.caller = caller
        self.projects = OrganizationProjects(session, caller)

    async def get(self, project_id: str) -> ModelPermissionsObject:
        return permissions_object(await self.projects.get(project_id))

    async def set(self, project_id: str, params: ModelPermissionsParams | None) -> ModelPermissionsObject:
        """Replace the project's permissions (None: every model again)."""
        row = await self.projects.get_active(project_id)
        ids = list(dict.fromkeys(params.model_ids)) if params else None
        row.model_permissions_mode = params.mode if params else None
        row.model_ids = json.dumps(ids) if ids is not None else None
        row.updated_at = int(time.time())
        await self.session.flush()
        change = {"mode": params.mode, "model_ids": ids} if params else None
        await record(
            self.session,
            self.caller.key_id,
            "project.updated",
            row.name,
            row.name,
            {"changes_requested": {"model_permissions": change}},
        )
        return permissions_object(row)


class ModelRule:
    """A project's allow or deny list: which models its lines may name."""

    def __init__(self, mode: str, model_ids: Sequence[str]) -> None:
        self.allow = mode == "allow_list"
        self.model_ids = frozenset(model_ids)

    def refusal(self, body: Any) -> str | None:
        """OpenAI's message for a line naming a model the project may not use, else None."""
        model = body.get("model") if isinstance(body, dict) else None
        if isinstance(model, str) and (model in self.model_ids) != self.allow:
            return f"The model `{model}` does not exist or you do not have access to it."
        return None


class PermittedModels:
    """A LineChecker that refuses the models a project may not use, else asks the engines'."""

    def __init__(self, checker: LineChecker, rule: ModelRule) -> None:
        self.checker = checker
        self.rule = rule

    def validate_line(self, endpoint: str, body: Any) -> LineProblem | None:
        refused = self.rule.refusal(body)
        if refused is not None:
            return LineProblem(MODEL_NOT_FOUND, refused, "body.model")
        return self.checker.validate_line(endpoint, body)

    def lines_pass(self, endpoint: str, model: str, bodies: Sequence[dict[str, Any]]) -> bool:
        if bodies and self.rule.refusal(bodies[0]) is not None:  # the rule reads the model alone
            return False
        return self.checker.lines_pass(endpoint, model, bodies)

    async def count_prompt_tokens(self, endpoint: str, bodies: Sequence[Any]) -> list[int]:
        return await self.checker.count_prompt_tokens(endpoint, bodies)


class PermittedRunner:
    """A LineRunner that answers a line naming a model the project may not use as OpenAI answers
    one (404 `model_not_found`), as the engines answer a model they do not serve, else runs it."""

    def __init__(self, runner: LineRunner, rule: ModelRule) -> None:
        self.runner = runner
        self.rule = rule

    async def execute(
        self, endpoint: str, body: Any, request_id: str, priority: int = 0, *, urgency: Urgency = NO_DEADLINE
    ) -> LineResult:
        refused = self.rule.refusal(body)
        if refused is not None:
            return LineResult(404, error_envelope(refused, "invalid_request_error", code=MODEL_NOT_FOUND))
        return await self.runner.execute(endpoint, body, request_id, priority, urgency=urgency)

    async def abort(self, request_id: str) -> bool:
        return await self.runner.abort(request_id)


async def _rule(db: Database, project: str) -> ModelRule | None:
    """The project's rule; None when it may use every model."""
    async with db.read() as session:
        row = await ProjectRepository(session).get(project)
    if row is None or row.model_permissions_mode is None:
        return None
    return ModelRule(row.model_permissions_mode, json.loads(row.model_ids or "[]"))


async def checker_for(db: Database, project: str, checker: LineChecker) -> LineChecker:
    """The engines' checker, narrowed to the models the project may use."""
    rule = await _rule(db, project)
    return checker if rule is None else PermittedModels(checker, rule)


async def runner_for(db: Database, project: str, runner: LineRunner) -> LineRunner:
    """The engines' runner, refusing the models the project may not use (read when a shard
    starts: a change reaches the shards that start after it)."""
    rule = await _rule(db, project)
    return runner if rule is None else PermittedRunner(runner, rule)
