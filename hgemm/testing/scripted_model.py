"""A scripted "model" for the replay server: it edits the parent a prompt shows by one setting at a time.

`ParamTweaker(seed)` is a `Step.respond` callable. It reads the conversation the way a model would see it:
the first user message's ```cuda block is the parent; every `#define HG_NAME <integer>` line of it is a
setting it may change. Each answer is one SEARCH/REPLACE block that moves one setting to a neighbouring
value (halved, doubled, or one step up or down), never a setting it already changed in this conversation;
a repair turn also undoes the change that failed, an improvement turn builds on it, and a refused edit
starts again from the parent. Some edits break a family's rules, and the
evaluator rejects those: the repair turns then have something to repair. With no parent in the prompt it
answers in prose only. It never sees the network and knows nothing about GPUs: it is a stand-in for a real
model, for demonstrations and tests of the proposer's cycle, and reports say so.
"""

from __future__ import annotations

import random
import re
from typing import Any

_PARENT = re.compile(r"# Parent kernel.*?```cuda\n(.*?)```", re.DOTALL)
_SETTING = re.compile(r"^#define (HG_[A-Z0-9_]+) (\d+)$", re.MULTILINE)
_CHANGE = re.compile(r"^Trying (HG_[A-Z0-9_]+) = (\d+) \(was (\d+)\)", re.MULTILINE)


def _neighbours(value: int) -> list[int]:
    out = {value * 2, value // 2, value + 1, value - 1} if value > 1 else {value + 1, 2}
    return sorted(v for v in out if v >= 0 and v != value)


class ParamTweaker:
    name = "scripted:param-tweaker"

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def __call__(self, messages: list[dict[str, Any]], n: int) -> list[str]:
        users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
        mine = [str(m.get("content", "")) for m in messages if m.get("role") == "assistant"]
        match = _PARENT.search(users[0]) if users else None
        if match is None:
            return ["No parent kernel is shown, so there is nothing to edit."] * n
        settings = [(m.group(1), int(m.group(2))) for m in _SETTING.finditer(match.group(1))]
        changes = [(a, int(b), int(c)) for text in mine for a, c, b in _CHANGE.findall(text)]
        last = users[-1]
        revert = None
        if "could not be applied" in last:  # the edit was refused: the base is the parent again
            changes = []
        elif " failed" in last and changes:  # the last change broke it: undo that, try another setting
            revert = changes[-1]
        used = {name for name, _, _ in changes}
        current = {name: new for name, _, new in changes}
        if revert:
            current[revert[0]] = revert[1]
        options = [
            (name, current.get(name, old), new)
            for name, old in settings
            if name not in used
            for new in _neighbours(old)
        ]
        if not options:
            return ["Every setting has been tried once."] * n
        texts = []
        for _ in range(n):
            name, old, new = self.rng.choice(options)
            text = f"Trying {name} = {new} (was {old}).\n"
            if revert:
                r_name, r_old, r_new = revert
                text += f"Undoing {r_name} = {r_new} (back to {r_old}).\n" + _block(r_name, r_new, r_old)
            texts.append(text + _block(name, old, new))
        return texts


def _block(name: str, old: int, new: int) -> str:
    return f"<<<<<<< SEARCH\n#define {name} {old}\n=======\n#define {name} {new}\n>>>>>>> REPLACE\n"
