"""`chatdata pack` and `chatdata info` on a token set, run as a user would."""
from __future__ import annotations

import json
import math

from tests_train_helpers import run_cli


def test_pack_prints_bins_efficiency_and_lower_bound(cli_token_folder):
    from chatdata.train import TokenDataset, pack

    res = run_cli("pack", cli_token_folder, "--max-tokens", "8192")
    assert res.returncode == 0, res.stderr
    plan = pack(TokenDataset(cli_token_folder).lengths, 8192)
    lb = math.ceil(plan.num_tokens / 8192)
    assert f"{len(plan)} of 8192 tokens (bfd)" in res.stdout
    assert f"ceil({plan.num_tokens} / 8192) = {lb} bins: +{len(plan) - lb}" in res.stdout
    assert f"{100 * plan.efficiency:.2f}%" in res.stdout
    js = json.loads(run_cli("pack", cli_token_folder, "--max-tokens", "4096", "--strategy", "ffd", "--json").stdout)
    assert js["strategy"] == "ffd" and js["bins"] >= js["lower_bound"] == math.ceil(js["tokens"] / 4096)


def test_pack_errors_are_one_line(cli_token_folder, tmp_path):
    too_small = run_cli("pack", cli_token_folder, "--max-tokens", "100")
    assert too_small.returncode == 1 and "more than max_tokens=100" in too_small.stderr
    assert "--overflow truncate|split|drop" in too_small.stderr and "Traceback" not in too_small.stderr
    ok = run_cli("pack", cli_token_folder, "--max-tokens", "100", "--overflow", "split", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["packed_tokens"] == json.loads(ok.stdout)["tokens"]
    assert "must be > 0" in run_cli("pack", cli_token_folder, "--max-tokens", "0").stderr
    (tmp_path / "notes").mkdir()
    res = run_cli("pack", tmp_path / "notes", "--max-tokens", "10")
    assert res.returncode == 1 and "not a token set" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("pack", tmp_path / "nowhere", "--max-tokens", "10")
    assert res.returncode == 1 and "no such token set" in res.stderr


def test_info_describes_a_token_set(cli_token_folder, tmp_path):
    from chatdata.train import TokenDataset

    ds = TokenDataset(cli_token_folder)
    res = run_cli("info", cli_token_folder, "--plot", tmp_path / "lengths.png")
    assert res.returncode == 0, res.stderr
    assert "token set" in res.stdout and "trained tokens" in res.stdout and "length histogram" in res.stdout
    assert (tmp_path / "lengths.png").read_bytes()[:4] == b"\x89PNG"
    js = json.loads(run_cli("info", cli_token_folder, "--json").stdout)
    assert js["sequences"] == len(ds) == 60 and js["tokens"] == ds.num_tokens
    assert js["length_quantiles"]["max"] == int(ds.lengths.max())
    assert 0.05 < js["trained_fraction"] < 0.95
    assert sum(c for _, _, c in js["length_histogram"]) == 60
