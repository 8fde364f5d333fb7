"""hgemm.bench.fit_wgmma_factors: archive rows, the --current filter, and a fit on the committed seed archive.

`--current` keeps kernels that the wgmma template still renders byte for byte, so which committed records
count changes with every template edit. The tests therefore read a copy of the committed archive in which the
kernels created before a cut carry the hash of their rendering today: exactly those count as current.
"""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest
from hgemm.bench import fit_wgmma_factors as fit
from hgemm.evaluator.kernels import FAMILIES

from hgemm.core.record import kernel_hash

# The seed archive: every grid100 search on the H100 (and the H200 records they started from), 2026-11-22 to -24.
ARCHIVE = Path(__file__).resolve().parents[1] / "bench" / "results" / "archive-grid100-r10-H100-2026-11-24.jsonl.xz"
H100 = "NVIDIA H100 80GB HBM3"
CUT = "2026-11-22T09:00"  # kernels archived before this render as today in the copy


def rendered_today(source: Path, target: Path, cut: str = CUT) -> Path:
    """`source` with every wgmma kernel created before `cut` re-keyed to the hash of its rendering today."""
    family, rekey, lines = FAMILIES["wgmma"], {}, []
    for text in lzma.open(source, "rt"):
        line = json.loads(text)
        if line.get("type") == "kernel" and line.get("family") == "wgmma" and line.get("created", "") < cut:
            rekey[line["hash"]] = kernel_hash(family.render(line["params"]))
            line["hash"] = rekey[line["hash"]]
        elif line.get("type") == "record" and line["record"].get("kernel_hash") in rekey:
            line["record"]["kernel_hash"] = rekey[line["record"]["kernel_hash"]]
        lines.append(json.dumps(line))
    with lzma.open(target, "wt") as out:
        out.write("\n".join(lines) + "\n")
    return target


@pytest.fixture(scope="module")
def seed_today(tmp_path_factory):
    return rendered_today(ARCHIVE, tmp_path_factory.mktemp("fit") / "seed.jsonl.xz")


def test_current_keeps_only_kernels_the_template_renders_the_same_way(seed_today):
    every = fit.archive_rows(str(seed_today), H100)
    current = fit.archive_rows(str(seed_today), H100, current=True)
    assert 0 < len(current) < len(every)

    def key(row):
        params, shape, us = row
        return tuple(sorted(params.items())), shape, us

    assert {key(r) for r in current} <= {key(r) for r in every}
    assert not fit.archive_rows(str(seed_today), "a GPU never measured")


def test_the_fit_runs_on_the_committed_archive(capsys, seed_today):
    assert fit.main(["--gpu-name", H100, "--sweeps", "--archive", str(seed_today), "--current"]) == 0
    out = capsys.readouterr().out
    assert "with factors (shape left out)" in out and "factors fitted on all shapes" in out


def test_times_measured_after_a_date_are_judged_not_fitted(capsys, tmp_path):
    every = rendered_today(ARCHIVE, tmp_path / "all.jsonl.xz", cut="9999")  # every kernel renders as today
    since = "2026-11-22T14:40"
    before = fit.archive_rows(str(every), H100, current=True, before=since)
    after = fit.archive_rows(str(every), H100, current=True, since=since)
    assert before and after and len(before) + len(after) == len(fit.archive_rows(str(every), H100, current=True))
    assert fit.main(["--gpu-name", H100, "--l2-mib", "50", "--sweeps", "--archive", str(every), "--current",
                     "--holdout-since", since]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert f"{len(before)} measured wgmma times" in out
    assert f"held out: {len(after)} times measured since {since}" in out


def test_nothing_to_fit_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        fit.main(["--gpu-name", H100])
    assert exc.value.code == 2
    assert "nothing to fit" in capsys.readouterr().err


def test_a_holdout_that_leaves_too_few_shapes_to_fit_says_so(capsys, seed_today):
    """Every current record measured after the cut: nothing left to fit, a one-line error and exit 2."""
    assert fit.main(["--gpu-name", H100, "--sweeps", "--archive", str(seed_today), "--current",
                     "--holdout-since", "2000-01-01"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "too few to fit" in err and "--holdout-since 2000-01-01 leaves" in err
