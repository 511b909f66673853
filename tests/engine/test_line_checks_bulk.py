"""A checker's verdict on a chunk of one model's bodies (`lines_pass`) is what asking
`validate_line` body by body would say: True exactly when none is refused."""

from __future__ import annotations

import pytest

from app.domains.limits.model_permissions import ModelRule, PermittedModels
from app.engine.boot import NoModels
from app.engine.line_checks import common_line_problem, common_lines_pass
from app.engine.results import LineProblem

EMBED, AUDIO = "/v1/embeddings", "/v1/audio/transcriptions"
SERVED = {"m": frozenset({EMBED, AUDIO})}


def _body(**extra):
    return {"model": "m", "input": "x", **extra}


CHUNKS = {
    "clean": [_body(), _body(), _body(stream=False)],
    "one streams": [_body(), _body(stream=True), _body()],
    "a stream of 1": [_body(stream=1), _body()],
    "a stream that is a list": [_body(stream=[True]), _body()],
    "empty": [],
}


@pytest.mark.parametrize("endpoint", [EMBED, "/embeddings", AUDIO, "/v1/chat/completions"])
@pytest.mark.parametrize("chunk", list(CHUNKS))
def test_common_checks_in_bulk_agree_with_each_line(endpoint, chunk):
    bodies = CHUNKS[chunk]
    each = all(common_line_problem(endpoint, b, SERVED.get, list(SERVED))[0] is None for b in bodies)
    assert common_lines_pass(endpoint, bodies, SERVED.get, list(SERVED)) == each


def test_audio_bodies_are_asked_one_by_one():
    bodies = [_body(file_url="https://example.com/a.wav"), _body(file_url="file:///etc/passwd")]
    each = [common_line_problem(AUDIO, b, SERVED.get, list(SERVED))[0] for b in bodies]
    assert common_lines_pass(AUDIO, bodies, SERVED.get, list(SERVED)) == all(p is None for p in each)


class _Upstream:
    def validate_line(self, endpoint, body):
        return common_line_problem(endpoint, body, SERVED.get, list(SERVED))[0]

    def lines_pass(self, endpoint, model, bodies):
        return common_lines_pass(endpoint, bodies, SERVED.get, list(SERVED))

    async def count_prompt_tokens(self, endpoint, bodies):
        return [1] * len(bodies)


@pytest.mark.parametrize("mode", ["allow_list", "deny_list"])
def test_a_project_rule_refuses_in_bulk_as_line_by_line(mode):
    checker = PermittedModels(_Upstream(), ModelRule(mode, ["m"]))
    bodies = CHUNKS["clean"]
    each = all(checker.validate_line(EMBED, b) is None for b in bodies)
    assert checker.lines_pass(EMBED, "m", bodies) == each == (mode == "allow_list")


def test_no_models_refuses_every_chunk_but_an_empty_one():
    engines = NoModels()
    assert isinstance(engines.validate_line(EMBED, _body()), LineProblem)
    assert engines.lines_pass(EMBED, "m", [_body()]) is False
    assert engines.lines_pass(EMBED, "m", []) is True
