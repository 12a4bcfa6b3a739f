"""Client-side chat templates: the tokenizer's Jinja template, rendered as transformers does.

Datasets that upstream renders client-side (``custom`` and ``spec_bench`` without
``--skip-chat-template``) call ``apply_chat_template([{"role": "user", "content": prompt}],
add_generation_prompt=True, tokenize=False, **--chat-template-kwargs)``. This module does the
same without transformers: the template comes from the tokenizer's ``chat_template.jinja`` or
its ``tokenizer_config.json`` (``"default"`` of a list of named templates), and is rendered in
jinja2's immutable sandbox with transformers' settings (``trim_blocks``, ``lstrip_blocks``,
loop controls, a ``{% generation %}`` block, ``raise_exception``, ``strftime_now`` and its
``tojson``), given ``messages``, ``tools=None``, ``documents=None``,
``add_generation_prompt``, the special tokens (``bos_token``, ``eos_token``, ...) and the
keyword arguments.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from loadgen.text.hub import HubError, hub_file
from loadgen.text.tokenizer import MOCK_MODEL_NAME, PACKAGED_TOKENIZER, is_local_path

SPECIAL_TOKEN_KEYS = (
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
)  # fmt: skip
TEMPLATE_FILE = "chat_template.jinja"
CONFIG_FILE = "tokenizer_config.json"


class ChatTemplateError(ValueError):
    """No usable chat template; the message names the tokenizer and the way out."""


@dataclass(frozen=True)
class ChatTemplate:
    """A tokenizer's chat template with the special tokens it may refer to."""

    source: str
    special_tokens: dict[str, Any] = field(default_factory=dict)

    def render_user_prompt(self, prompt: str, kwargs: dict[str, Any] | None = None) -> str:
        """The prompt as one user message, templated with the generation prompt after it."""
        return self.render([{"role": "user", "content": prompt}], kwargs)

    def render(self, messages: list[dict[str, Any]], kwargs: dict[str, Any] | None = None) -> str:
        """``apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kw)``."""
        import jinja2

        try:
            return _compiled(self.source).render(
                messages=messages,
                add_generation_prompt=True,
                # kwargs may give tools (BFCL renders its tool schemas, as upstream counts them)
                **{"tools": None, "documents": None, **self.special_tokens, **(kwargs or {})},
            )
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(f"the chat template failed: {exc}") from None


def load_chat_template(tokenizer_id: str) -> ChatTemplate:
    """The chat template of a tokenizer given as for --tokenizer: a tokenizer.json, a directory
    holding one, a Hugging Face id (its files fetched as the tokenizer's are), or the mock's."""
    if tokenizer_id == MOCK_MODEL_NAME:
        return _from_directory(PACKAGED_TOKENIZER.parent, tokenizer_id)
    path = Path(tokenizer_id).expanduser()
    if path.is_file():
        return _from_directory(path.parent, tokenizer_id)
    if path.is_dir() or is_local_path(tokenizer_id):
        return _from_directory(path, tokenizer_id)
    return _from_hub(tokenizer_id)


def _from_directory(directory: Path, tokenizer_id: str) -> ChatTemplate:
    config_path = directory / CONFIG_FILE
    config = _read_config(config_path) if config_path.is_file() else {}
    template_path = directory / TEMPLATE_FILE
    source = template_path.read_text(encoding="utf-8") if template_path.is_file() else None
    return _template(config, source, tokenizer_id)


def _from_hub(repo_id: str) -> ChatTemplate:
    def fetch(name: str) -> Path | None:
        try:
            return hub_file(repo_id, name)
        except HubError as exc:
            raise ChatTemplateError(
                f"cannot fetch the chat template of '{repo_id}': {exc}; pass --tokenizer with "
                "a local directory, or --skip-chat-template"
            ) from None

    template_path = fetch(TEMPLATE_FILE)
    config_path = fetch(CONFIG_FILE)
    config = _read_config(config_path) if config_path is not None else {}
    source = template_path.read_text(encoding="utf-8") if template_path is not None else None
    return _template(config, source, repo_id)


def _read_config(path: Path) -> dict[str, Any]:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ChatTemplateError(f"cannot read {path}: {exc}") from None
    if not isinstance(config, dict):
        raise ChatTemplateError(f"{path} is not a JSON object")
    return config


def _template(config: dict[str, Any], source: str | None, tokenizer_id: str) -> ChatTemplate:
    """A separate chat_template.jinja wins over the config's, as in transformers."""
    if source is None:
        source = config.get("chat_template")
        if isinstance(source, list):  # named templates: apply_chat_template uses "default"
            named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
            source = named.get("default")
    if not isinstance(source, str) or not source:
        raise ChatTemplateError(
            f"tokenizer '{tokenizer_id}' has no chat template ({TEMPLATE_FILE}, or chat_template "
            f"in {CONFIG_FILE}); pass --skip-chat-template to send the prompts as written"
        )
    special = {key: _token_text(config[key]) for key in SPECIAL_TOKEN_KEYS if config.get(key)}
    extra = config.get("additional_special_tokens")
    if isinstance(extra, list):
        special["additional_special_tokens"] = [_token_text(t) for t in extra]
    return ChatTemplate(source, special)


def _token_text(token: Any) -> Any:
    """A special token as text: tokenizer_config.json may store it as an AddedToken dict."""
    return token.get("content") if isinstance(token, dict) else token


@functools.lru_cache(maxsize=4)
def _compiled(source: str) -> Any:
    """The template compiled once, however many prompts it renders."""
    return _environment().from_string(source)


def _environment() -> Any:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlock(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}`` renders its body (transformers marks
        assistant tokens with it; nothing to mark here)."""

        # jinja2 declares tags on the instance; it reads them from the class.
        tags: ClassVar[set[str]] = {"generation"}  # type: ignore[misc]

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            call = self.call_method("_body")
            return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return caller()

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:  # fmt: skip
        return json.dumps(
            value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
            sort_keys=sort_keys,
        )  # fmt: skip

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env
