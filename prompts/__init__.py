"""Prompt templates, their renderer and their wording tables: all prompt text lives in this folder.

`render(name, **variables)` renders one template with Jinja2's StrictUndefined: a variable the
template uses but the caller did not pass raises, and so does a variable the caller passes that
the template never uses (a misspelt name must not silently vanish from a prompt).
`variables(name)` lists the top-level names a template reads. `wording(name)` reads a TOML table of
fixed sentences (`feedback.toml`: what a prompt says about failed candidates). No prompt text lives
in Python.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from types import MappingProxyType
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


@cache
def wording(name: str) -> MappingProxyType:
    """The sentences of TOML file `name` in this folder, read once, as read-only mappings of tables."""
    data = tomllib.loads(resources.files("hgemm.prompts").joinpath(name).read_text())
    return MappingProxyType({table: MappingProxyType(dict(rows)) for table, rows in data.items()})


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
