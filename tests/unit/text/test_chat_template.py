"""Client-side chat templates, rendered as transformers renders them (loadgen/chat_template.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loadgen.datasets.custom import sample_custom_requests
from loadgen.text.chat_template import ChatTemplate, ChatTemplateError, load_chat_template
from loadgen.text.tokenizer import PACKAGED_TOKENIZER, LocalTokenizer, load_tokenizer

LLAMA_LIKE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
    "\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def tokenizer_dir(tmp_path: Path, config: dict, jinja: str | None = None) -> Path:
    shutil.copy(PACKAGED_TOKENIZER, tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    if jinja is not None:
        (tmp_path / "chat_template.jinja").write_text(jinja)
    return tmp_path


def test_template_from_tokenizer_config_with_special_tokens(tmp_path: Path) -> None:
    config = {"chat_template": LLAMA_LIKE, "bos_token": {"content": "<B>", "special": True}}
    template = load_chat_template(str(tokenizer_dir(tmp_path, config)))
    assert template.render_user_prompt("  hi  ") == (
        "<B><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    # A tokenizer.json path finds the files beside it.
    assert load_chat_template(str(tmp_path / "tokenizer.json")) == template


def test_a_separate_jinja_file_wins_and_named_templates_use_default(tmp_path: Path) -> None:
    named = [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ x }}"}]
    directory = tokenizer_dir(tmp_path, {"chat_template": named})
    assert load_chat_template(str(directory)).render_user_prompt("p", {"x": 1}) == "D1"
    (directory / "chat_template.jinja").write_text("J")
    assert load_chat_template(str(directory)).render_user_prompt("p") == "J"


def test_transformers_environment_features() -> None:
    source = (
        "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
        "{% generation %}{{ m | tojson }}{% endgeneration %}{% endfor %}"
        "{% if tools is none and documents is none %}|none{% endif %}"
        "{% if thinking %}|think{% endif %}{{ '|' + strftime_now('%Y')[:2] }}"
    )
    rendered = ChatTemplate(source).render_user_prompt("é", {"thinking": True})
    assert rendered == '{"role": "user", "content": "é"}|none|think|20'  # no ASCII escapes


def test_template_errors_name_the_way_out(tmp_path: Path) -> None:
    with pytest.raises(ChatTemplateError, match=r"has no chat template.*--skip-chat-template"):
        load_chat_template(str(tokenizer_dir(tmp_path, {"bos_token": "<s>"})))
    failing = ChatTemplate("{{ raise_exception('only user/assistant roles') }}")
    with pytest.raises(ChatTemplateError, match="the chat template failed: only user/assistant"):
        failing.render_user_prompt("x")


def test_the_mock_tokenizer_has_a_template_like_its_chat_endpoint() -> None:
    rendered = load_chat_template("loadgen-mock").render_user_prompt("hello")
    assert rendered == "<|begin_of_text|>user: hello\nassistant: "


def test_custom_prompts_are_templated_then_counted_with_special_tokens() -> None:
    tok = LocalTokenizer(load_tokenizer("loadgen-mock"))
    template = load_chat_template("loadgen-mock")
    rows = [{"prompt": "the cat"}, {"prompt": "a dog"}]
    ds = sample_custom_requests(
        rows, tok, 2, 8, seed=0, disable_shuffle=True, template=template.render_user_prompt
    )
    assert ds.prompts == [template.render_user_prompt(r["prompt"]) for r in rows]
    expected = [len(ids) + 1 for ids in tok.encode_batch(ds.prompts)]  # + BOS, as upstream
    assert ds.prompt_lens.tolist() == expected
