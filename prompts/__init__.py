"""Prompt templates and their renderer; the templates (`*.j2` in this folder) hold all prompt text.

- `render(name, **variables)` uses Jinja2's StrictUndefined: a variable the template uses but the caller did
  not pass raises, and so does one the caller passes that the template never uses (a misspelt name must not
  silently vanish from a prompt).
- `variables(name)` lists the top-level names a template reads.
- No prompt text lives in Python.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import jinja2
from jinja2 import meta


class PromptError(ValueError):
    """A template was rendered with missing or unknown variables."""


@cache
def _env() -> jinja2.Environment:
    folder = str(resources.files("hgemm.prompts"))
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def names() -> list[str]:
    """Every template in this folder, by file name."""
    return sorted(p.name for p in resources.files("hgemm.prompts").iterdir() if p.name.endswith(".j2"))


def variables(name: str) -> set[str]:
    """Top-level variables template `name` reads (follows nothing: templates do not include others)."""
    env = _env()
    source = env.loader.get_source(env, name)[0]
    return set(meta.find_undeclared_variables(env.parse(source)))


def render(name: str, **values: Any) -> str:
    """Render template `name`; missing or unknown variables raise PromptError."""
    wanted = variables(name)
    unknown = set(values) - wanted
    missing = wanted - set(values)
    if unknown or missing:
        raise PromptError(f"{name}: missing {sorted(missing)}, unknown {sorted(unknown)}")
    try:
        return _env().get_template(name).render(**values)
    except jinja2.UndefinedError as e:
        raise PromptError(f"{name}: {e}") from e
