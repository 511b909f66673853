"""--model strings, the model config file and ModelSpec's options."""

from __future__ import annotations

import json

import pytest

from app.engine.config.catalog import builtin_model_specs, resolve_model_specs
from app.engine.config.specs import ModelSpec, load_model_config, parse_model_arg
from app.engine.errors import ModelConfigError


def test_parse_model_arg(tmp_path):
    local = tmp_path / "my-model"
    local.mkdir()

    assert parse_model_arg("chat=/models/qwen") == ("chat", "/models/qwen")
    assert parse_model_arg("Qwen/Qwen2.5-0.5B-Instruct") == (
        "Qwen/Qwen2.5-0.5B-Instruct",
        "Qwen/Qwen2.5-0.5B-Instruct",
    )
    assert parse_model_arg(str(local)) == ("my-model", str(local))
    # A '=' inside a path is not a served-name separator.
    assert parse_model_arg("/models/a=b") == ("/models/a=b", "/models/a=b")
    with pytest.raises(ModelConfigError):
        parse_model_arg("  ")


def test_config_file_yaml_and_json(tmp_path):
    yaml_file = tmp_path / "models.yaml"
    yaml_file.write_text(
        "models:\n"
        "  chat:\n"
        "    path: /models/qwen\n"
        "    dtype: bfloat16\n"
        "    max_model_len: 4096\n"
        "    kv_cache_gib: 2\n"
        "    max_num_seqs: 32\n"
        "    engine_args: {enforce-eager: true}\n"
    )
    json_file = tmp_path / "models.json"
    json_file.write_text(json.dumps({"models": {"emb": {"runner": "pooling"}}}))

    assert load_model_config(yaml_file) == {
        "chat": {
            "path": "/models/qwen",
            "dtype": "bfloat16",
            "max_model_len": 4096,
            "kv_cache_gib": 2.0,
            "max_num_seqs": 32,
            "engine_args": {"enforce_eager": True},
        }
    }
    assert load_model_config(json_file) == {"emb": {"runner": "pooling"}}


@pytest.mark.parametrize(
    "config",
    [
        {"models": {"chat": {"max_len": 10}}},
        {"models": {"chat": {"max_model_len": "long"}}},
        {"models": {"chat": {"engine_args": [1]}}},
        {"model": {}},
        {"models": ["chat"]},
    ],
)
def test_config_errors(config):
    with pytest.raises(ModelConfigError):
        load_model_config(config)


def test_memory_options_replace_each_other(tmp_path):
    tiny = builtin_model_specs(tmp_path)[0]
    assert tiny.kv_cache_gib is not None

    share = tiny.with_options({"gpu_memory_utilization": 0.2})
    assert (share.kv_cache_gib, share.gpu_memory_utilization) == (None, 0.2)
    with pytest.raises(ModelConfigError):
        ModelSpec(name="x", path="x", kv_cache_gib=1, gpu_memory_utilization=0.2)


def test_load_always_or_on_demand(tmp_path):
    specs = resolve_model_specs(
        config={"models": {"all-MiniLM-L6-v2": {"load": "on-demand"}, "batchd-tiny-chat": {}}}, data_dir=tmp_path
    )
    assert {spec.name: spec.load for spec in specs if isinstance(spec, ModelSpec)} == {
        "all-MiniLM-L6-v2": "on-demand",
        "batchd-tiny-chat": "always",
    }
    with pytest.raises(ModelConfigError, match="load must be one of always, on-demand"):
        resolve_model_specs(config={"models": {"m": {"load": "lazy"}}}, data_dir=tmp_path)
    with pytest.raises(ModelConfigError, match="wrong type"):
        load_model_config({"models": {"m": {"load": True}}})


def test_memory_gib_is_the_engines_memory_need_under_a_budget(tmp_path):
    specs = resolve_model_specs(config={"models": {"m": {"path": "/m", "memory_gib": 6}}}, data_dir=tmp_path)
    assert [(spec.name, spec.memory_gib) for spec in specs if isinstance(spec, ModelSpec)] == [("m", 6.0)]
    with pytest.raises(ModelConfigError, match="memory_gib must be more than 0"):
        ModelSpec(name="x", path="x", memory_gib=0)
    with pytest.raises(ModelConfigError, match="wrong type"):
        load_model_config({"models": {"m": {"memory_gib": "6GiB"}}})
