"""LoRA adapters: `--lora` values, `adapters:` in the config, their bases, and the built-in
`batchd-tiny-lora` (deterministic, PEFT-format, shaped to the tiny chat model)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from app.engine.config.adapters import parse_lora_arg
from app.engine.config.catalog import resolve_model_specs
from app.engine.config.specs import ModelSpec
from app.engine.config.tiny_lora import RANK, build_tiny_lora_adapter
from app.engine.errors import ModelConfigError


def _adapter(folder: Path, base: str) -> str:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base, "r": 8}))
    return str(folder)


def _adapters(specs) -> dict[str, list[tuple[str, str]]]:
    return {s.name: [(a.name, a.path) for a in s.adapters] for s in specs if isinstance(s, ModelSpec)}


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("tl=batchd-tiny-lora", ("tl", "batchd-tiny-lora", None)),
        ("legal=/a/b@chat", ("legal", "/a/b", "chat")),
        ("x=/a@b/c@Qwen/Qwen2.5", ("x", "/a@b/c", "Qwen/Qwen2.5")),
    ],
)
def test_lora_values(value, parsed):
    assert parse_lora_arg(value) == parsed


@pytest.mark.parametrize("value", ["tl", "=/a", "tl=", "a/b=/c", "x=/a@"])
def test_bad_lora_values(value):
    with pytest.raises(ModelConfigError):
        parse_lora_arg(value)


def test_builtin_adapter_joins_the_builtin_chat_model(tmp_path):
    specs = resolve_model_specs([], None, data_dir=tmp_path, lora_args=["tl=batchd-tiny-lora"])
    assert _adapters(specs) == {
        "batchd-tiny-chat": [("tl", str(tmp_path / "models" / "batchd-tiny-lora"))],
        "all-MiniLM-L6-v2": [],
    }
    # Under another served name too: the base is found by its folder.
    renamed = resolve_model_specs(["chat=batchd-tiny-chat"], None, data_dir=tmp_path, lora_args=["tl=batchd-tiny-lora"])
    assert _adapters(renamed) == {"chat": [("tl", str(tmp_path / "models" / "batchd-tiny-lora"))]}


def test_base_from_adapter_config_by_name_or_path(tmp_path):
    model = tmp_path / "qwen"
    model.mkdir()
    by_name = _adapter(tmp_path / "a1", "qwen")
    by_path = _adapter(tmp_path / "a2", str(model))
    explicit = _adapter(tmp_path / "a3", "something/else")
    specs = resolve_model_specs(
        [str(model), "other=some/hub-id"],
        None,
        data_dir=tmp_path,
        lora_args=[f"a1={by_name}", f"a2={by_path}", f"a3={explicit}@other"],
    )
    assert _adapters(specs) == {"qwen": [("a1", by_name), ("a2", by_path)], "other": [("a3", explicit)]}


def test_config_adapters(tmp_path):
    folder = _adapter(tmp_path / "legal", "unrelated")
    config = {"models": {"batchd-tiny-chat": {"adapters": {"legal": folder, "tl": "batchd-tiny-lora"}}}}
    specs = resolve_model_specs([], config, data_dir=tmp_path)
    assert _adapters(specs) == {
        "batchd-tiny-chat": [("legal", folder), ("tl", str(tmp_path / "models" / "batchd-tiny-lora"))]
    }


@pytest.mark.parametrize(
    ("lora", "message"),
    [
        ("tl=batchd-tiny-lora@nope", "'nope' is not served"),
        ("batchd-tiny-chat=batchd-tiny-lora", "already taken"),
        ("x=/no/such/folder", "cannot read"),
    ],
)
def test_refused_adapters(tmp_path, lora, message):
    with pytest.raises(ModelConfigError, match=message):
        resolve_model_specs([], None, data_dir=tmp_path, lora_args=[lora])


def test_an_upstream_model_takes_no_adapters(tmp_path):
    with pytest.raises(ModelConfigError, match="upstream"):
        resolve_model_specs(
            ["chat=http://127.0.0.1:9/v1"], None, data_dir=tmp_path, lora_args=["tl=batchd-tiny-lora@chat"]
        )


def test_tiny_lora_is_deterministic_and_fits_the_tiny_model(tmp_path):
    from safetensors import safe_open

    first = build_tiny_lora_adapter(tmp_path / "a" / "batchd-tiny-lora")
    second = build_tiny_lora_adapter(tmp_path / "b" / "batchd-tiny-lora")
    digest = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(first.iterdir())}
    assert set(digest) == {"adapter_config.json", "adapter_model.safetensors"}
    assert digest == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(second.iterdir())}
    config = json.loads((first / "adapter_config.json").read_text())
    assert (config["base_model_name_or_path"], config["peft_type"], config["r"]) == ("batchd-tiny-chat", "LORA", RANK)
    with safe_open(str(first / "adapter_model.safetensors"), "pt") as weights:
        shapes = {key: tuple(weights.get_slice(key).get_shape()) for key in weights.keys()}  # noqa: SIM118
    assert len(shapes) == 2 * 4 * 2  # layers x projections x (A, B)
    assert shapes["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"] == (RANK, 128)
    assert shapes["base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight"] == (64, RANK)
