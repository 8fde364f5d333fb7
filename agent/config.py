"""Settings for `hgemm optimize` and `hgemm prompt`, read from `hgemm.toml`.

- Lookup order: an explicit path, else `./hgemm.toml`, else `$HGEMM_HOME/hgemm.toml`, else defaults.
  Command-line options override the file.
- Every key is optional and documented in `hgemm.toml.example`; an unknown section or key is an error (a
  misspelt key must not be silently ignored).
- Secrets never live in the file: `llm.api_key_env` names the environment variable holding the API key.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hgemm.agent.template import REFRESH_WITHIN

from hgemm.core.errors import BadInput
from hgemm.core.paths import state_root

# USD per million tokens (prompt, completion): list prices when written; override under [llm.prices].
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "o3-mini": (1.10, 4.40),
}


@dataclass
class LLMConfig:
    model: str = "gpt-4o-mini"
    base_url: str = ""  # empty: the OpenAI API; else any OpenAI-compatible server
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.7
    max_tokens: int = 8192
    samples: int = 1  # completions per prompt
    timeout_s: float = 180.0  # per request
    retries: int = 4  # extra attempts on rate limits, timeouts, connection errors and 5xx
    backoff_s: float = 2.0  # first retry wait; doubles each time, with jitter
    local_model: str = ""  # a Hugging Face model directory: use it instead of a server
    local_adapter: str = ""  # a LoRA adapter directory for local_model (needs peft)
    exemplars: int = 3  # scored variants shown per prompt (besides the parent)
    failures: int = 4  # recent failures shown per prompt
    prompt_tokens: int = 12_000  # token budget of one prompt (system + user); 0: none
    repair_turns: int = 2  # follow-up prompts that show a failed kernel its failure, per lineage
    improve_turns: int = 1  # follow-up prompts that show a correct kernel its times and NCU metrics
    near_duplicates: str = "code"  # reject sources equal to a tried one but for: code (comments, layout), layout, off
    models: list[str] = field(default_factory=list)  # several models in one run, chosen by a bandit
    prices: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_PRICES))

    def price(self, model: str) -> tuple[float, float] | None:
        if self.local_model:
            return (0.0, 0.0)
        return self.prices.get(model)


@dataclass
class BudgetConfig:
    evals: int | None = 200
    minutes: float | None = 60.0
    llm_usd: float | None = 5.0
    llm_tokens: int | None = None


@dataclass
class SearchConfig:
    batch: int = 8  # candidates evaluated per quick round
    finalists: int = 2  # best quick results per round re-evaluated at the full stage
    patience: int = 3  # a proposer with this many rounds in a row of nothing new is retired
    seed: int = 0
    refresh: int = 2  # template proposer: archived configurations re-measured when their template changed, or when measured before `--measured-after`
    refresh_within: float = REFRESH_WITHIN  # ... only those measured within this factor of the shape's best
    quick_server: bool = False  # quick stage also times server mode; finalists promoted by the objective
    confirm: int = 3  # kernels measured again after the search (0: report unconfirmed figures)
    confirm_reps: int = 3  # fresh evaluations of each


@dataclass
class Config:
    llm: LLMConfig = field(default_factory=LLMConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    path: Path | None = None  # the file read, if any


def find_config(explicit: str | Path | None = None) -> Path | None:
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise BadInput(f"config file {path} does not exist")
        return path
    for candidate in (Path.cwd() / "hgemm.toml", state_root() / "hgemm.toml"):
        if candidate.is_file():
            return candidate
    return None


def _fill(obj: Any, table: dict[str, Any], where: str) -> None:
    known = {f.name: f for f in dataclasses.fields(obj)}
    for key, value in table.items():
        if key not in known or key == "prices":
            raise BadInput(f"{where}: unknown key {key!r}")
        default = getattr(obj, key)
        if default is not None and not isinstance(value, type(default)) or (
            isinstance(value, bool) and not isinstance(default, bool)
        ):
            if not (isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool)):
                raise BadInput(f"{where}.{key}: expected {type(default).__name__}, got {value!r}")
            value = float(value)
        setattr(obj, key, value)


def load_config(explicit: str | Path | None = None) -> Config:
    """Read the config file (see the module docstring for the lookup order)."""
    config = Config()
    path = find_config(explicit)
    if path is None:
        return config
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: {e}") from e
    config.path = path
    for section, table in data.items():
        if section not in ("llm", "budget", "search") or not isinstance(table, dict):
            raise BadInput(f"{path}: unknown section [{section}]")
        if section == "llm":
            table = dict(table)
            for model, pair in (table.pop("prices", None) or {}).items():
                if not (
                    isinstance(pair, list)
                    and len(pair) == 2
                    and all(isinstance(x, int | float) for x in pair)
                ):
                    raise BadInput(
                        f"{path}: [llm.prices] {model} must be [prompt_usd, completion_usd] per million"
                    )
                config.llm.prices[model] = (float(pair[0]), float(pair[1]))
        _fill(getattr(config, section), table, f"{path} [{section}]")
    if config.search.refresh_within < 1.0:
        raise BadInput(f"{path} [search].refresh_within: a factor of the best time, at least 1.0; got {config.search.refresh_within}")
    return config


# What `hgemm prompt` assumes about a GPU it cannot see (`--gpu NAME`); names as the driver reports them.
GPU_PRESETS: dict[str, dict[str, Any]] = {
    "h100-sxm": dict(
        name="NVIDIA H100 80GB HBM3", cc="9.0", sm_count=132, l2_mib=50, smem_kib=227, mem_gib=80
    ),
    "h100-pcie": dict(name="NVIDIA H100 PCIe", cc="9.0", sm_count=114, l2_mib=50, smem_kib=227, mem_gib=80),
    "h200": dict(name="NVIDIA H200", cc="9.0", sm_count=132, l2_mib=50, smem_kib=227, mem_gib=141),
    "a100": dict(name="NVIDIA A100-SXM4-80GB", cc="8.0", sm_count=108, l2_mib=40, smem_kib=163, mem_gib=80),
}


def gpu_preset(key: str, name: str | None = None) -> Any:
    """A GpuInfo from a preset; `name` (as an archive recorded it) replaces the preset's name."""
    from hgemm.core.record import GpuInfo

    if key not in GPU_PRESETS:
        raise BadInput(f"unknown GPU preset {key!r}; known: {', '.join(GPU_PRESETS)}")
    p = GPU_PRESETS[key]
    return GpuInfo(
        name=name or p["name"],
        cc=p["cc"],
        driver="",
        sm_count=p["sm_count"],
        l2_bytes=p["l2_mib"] << 20,
        smem_per_block_optin=p["smem_kib"] << 10,
        memory_bytes=p["mem_gib"] << 30,
    )


def preset_for_name(name: str) -> str:
    """The preset whose GPU a driver-reported name most likely is (H100 SXM when unsure)."""
    lowered = name.lower()
    if "h200" in lowered:
        return "h200"
    if "a100" in lowered:
        return "a100"
    if "h100" in lowered and "pcie" in lowered:
        return "h100-pcie"
    return "h100-sxm"
