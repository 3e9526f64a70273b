"""Building the pluggable parts the configuration names — for the shells only.

The library builds only the embedder ``config.embedding`` names (see
:mod:`stratamem.embed.default`); chat models and summarizers it never builds
from strings (you pass instances in). The CLI and the MCP server do it here, from a :class:`~stratamem.config.Config`,
reading API keys from the environment (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``).
"""

from __future__ import annotations

import os
from typing import Any

from ..config import Config
from ..errors import ConfigError
from ..tokens import Tokenizer

__all__ = ["build_chat_model", "build_embedding_model", "build_summarizer", "local_embeddings_available"]


def local_embeddings_available() -> bool:
    """Whether the local MiniLM weights and tokenizer are installed."""
    from ..embed.default import local_embeddings_available as available

    return available()


def build_embedding_model(config: Config) -> Any:
    """The embedding model ``config.embedding`` names (uncached), or ``None`` for ``none``.

    The same model ``Memory`` builds by default (:func:`stratamem.embed.default.configured_model`),
    shared within the process. Returns ``None`` for ``local`` when the weights
    are not installed; callers report that (recall then runs lexically and
    every manifest says so).

    Raises:
        ConfigError: ``openai`` without ``embedding.dimensions``.
    """
    from ..embed.default import configured_model

    return configured_model(config)


def build_chat_model(config: Config, *, model: str | None = None) -> Any:
    """The chat model ``config.llm`` names, or ``None`` when no provider is set.

    Raises:
        ConfigError: A provider without a model name, or a missing client library.
    """
    cfg = config.llm
    if cfg.provider is None:
        return None
    name = model or cfg.model
    if not name:
        raise ConfigError("llm.model is required when llm.provider is set")
    if cfg.provider == "openai":
        from ..llm import OpenAIChat

        return OpenAIChat(
            name,
            base_url=cfg.base_url,
            api_key=os.environ.get("OPENAI_API_KEY"),
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
        )
    from ..llm import AnthropicChat

    return AnthropicChat(
        name,
        base_url=cfg.base_url,
        api_key=os.environ.get("ANTHROPIC_API_KEY"),
        timeout_s=cfg.timeout_s,
        max_retries=cfg.max_retries,
    )


def build_summarizer(config: Config, tokenizer: Tokenizer) -> Any:
    """The ``llm`` summarizer when ``pyramid.summarizer`` is ``llm``; ``None`` otherwise.

    The model is ``pyramid.summarization_model`` when set, else ``llm.model``.

    Raises:
        ConfigError: ``llm`` is asked for but no ``llm.provider`` is configured.
    """
    if config.pyramid.summarizer != "llm":
        return None
    chat = build_chat_model(config, model=config.pyramid.summarization_model)
    if chat is None:
        raise ConfigError("pyramid.summarizer is 'llm' but llm.provider is not set")
    from ..summarize.llm import LLMSummarizer

    return LLMSummarizer(chat, tokenizer, max_input_tokens=config.llm.max_input_tokens)
