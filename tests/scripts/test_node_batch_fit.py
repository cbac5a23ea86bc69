"""scripts/node_batch_fit.py: a node's batches fitted per mode from its histories (no run)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scripts._load import load_script


def _history(path: Path, fixed_s: float, per_row_s: float) -> None:
    rows = [20_000 * (i % 4 + 1) for i in range(30)]
    lines = [{"plan": "avg", "batches": [{"rows": r, "duration_s": fixed_s + per_row_s * r}
                                         for r in rows]}]  # fmt: skip
    lines += [{"t": float(i), "arrived_tuples": 200_000, "admitted_tuples": 80_000,
               "overhead_s": 0.8, "per_tuple_s": 1e-5} for i in range(12)]  # fmt: skip
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_every_mode_of_a_folder_is_fitted_and_a_missing_one_skipped(tmp_path, capsys) -> None:
    script = load_script("node_batch_fit")
    _history(tmp_path / "coordinated" / "c" / "history.jsonl", 1.2, 2e-6)
    _history(tmp_path / "random" / "nodes" / "c" / "history.jsonl", 1.4, 3e-6)
    assert script.main([str(tmp_path), "--node", "c", "--lanes", "20"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4  # header, rule, two modes (no calibration, no uncoordinated)
    assert out[2].startswith("| coordinated | 20 |") and "| 1.20 / 2.00 / 1.00 |" in out[2]
    assert "| 1.40 / 3.00 / 1.00 |" in out[3] and "10,000 (0%)" in out[3]
    # with the 16 kept runs a lane had before log_runs, 10,000 records keeping 40 %: nearly
    # every shed record read (99.5 %)
    assert script.main([str(tmp_path), "--node", "c", "--lanes", "20", "--runs", "16"]) == 0
    assert "10,000 (100%)" in capsys.readouterr().out.splitlines()[3]
    assert script.main([str(tmp_path / "none"), "--node", "c", "--lanes", "20"]) == 2
