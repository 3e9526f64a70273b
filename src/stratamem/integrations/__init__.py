"""Adapters for agent frameworks, each an optional extra that imports its framework only when used.

* :mod:`stratamem.integrations.openai_agents` — an OpenAI Agents SDK ``Session`` (extra ``openai-agents``);
* :mod:`stratamem.integrations.langgraph` — a LangGraph ``BaseStore`` and a LangChain agent
  middleware (extra ``langgraph``);
* :mod:`stratamem.integrations.llamaindex` — a LlamaIndex memory block (extra ``llamaindex``);
* :mod:`stratamem.integrations.pydantic_ai` — a Pydantic AI history processor (extra ``pydantic-ai``).

Importing :mod:`stratamem` never imports any of these frameworks.
Each adapter is imported by its module path; this package exports nothing itself.
"""

__all__: list[str] = []
