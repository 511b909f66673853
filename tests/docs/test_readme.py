"""README.md is the front page: a newcomer following only it gets `make run` serving and a batch
through the `openai` client. The fast tests read README.md and the Makefile; the last one runs
README's client example, as written, against a server with the built-in models."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BASE_URL = "http://127.0.0.1:8000/v1"


def _client_example() -> str:
    section = README.split("## A batch with the `openai` client", 1)[1]
    return section.split("```python\n", 1)[1].split("\n```", 1)[0]


def test_the_front_page_is_short_and_starts_with_the_two_commands() -> None:
    assert len(README.splitlines()) <= 200
    first_block = README.split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in first_block.splitlines()] == [["make", "run"], ["make", "test"]]


def test_make_run_serves_where_the_examples_point() -> None:
    recipe = re.search(r"^run:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe is not None
    assert "serve --host 127.0.0.1 --port 8000" in recipe.group(1)
    assert "--model" not in recipe.group(1)  # the built-in models the examples name
    assert f'base_url="{BASE_URL}"' in _client_example()
    assert "batchd-tiny-chat" in _client_example()


def test_every_link_of_the_front_page_leads_to_a_file() -> None:
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    relative = [target for target in targets if "://" not in target]
    assert relative, "README links into the docs"
    assert [target for target in relative if not (ROOT / target).exists()] == []


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_client_example_runs_a_batch(model_server) -> None:
    code = _client_example().replace(BASE_URL, model_server.base_url).replace("your-batchd-key", "key-a")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    lines = printed.getvalue().splitlines()
    assert lines[0].startswith("completed ")
    assert "completed=2" in lines[0] and "failed=0" in lines[0]
    # Each result prints as "custom_id text"; the tiny model's text may hold line breaks.
    assert {custom_id for custom_id in ("q-0", "q-1") if any(line.startswith(f"{custom_id} ") for line in lines)} == {
        "q-0",
        "q-1",
    }
