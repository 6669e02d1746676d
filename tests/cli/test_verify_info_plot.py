"""``chatdata info --plot``: a PNG drawn by matplotlib, or a clear message without it."""
from __future__ import annotations

import struct
import sys
import zlib

import pytest
from cli_helpers import write_jsonl

from chatdata.cli import main


def _png_text(data: bytes) -> dict:
    """The PNG's size and its tEXt chunks (key -> text)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, out = 8, {}
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        assert struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0] == zlib.crc32(kind + body) & 0xFFFFFFFF
        if kind == b"IHDR":
            out["size"] = struct.unpack(">II", body[:8])
        elif kind == b"tEXt":
            key, _, text = body.partition(b"\0")
            out[key.decode("latin-1")] = text.decode("latin-1")
        pos += 12 + n
    return out


@pytest.fixture
def ds(tmp_path, capsys):
    chats = [{"messages": [{"role": "user", "content": "x" * (i * 7 % 200)}, {"role": "assistant", "content": "ok"}]
                          * (1 + i % 5)} for i in range(80)]
    out = tmp_path / "ds"
    assert main(["import", str(write_jsonl(tmp_path / "c.jsonl", chats)), str(out)]) == 0
    capsys.readouterr()
    return out


def test_info_plot_is_drawn_by_matplotlib(tmp_path, ds, capsys):
    png = tmp_path / "lengths.png"
    assert main(["info", str(ds), "--plot", str(png)]) == 0
    assert f"histograms written to {png}" in capsys.readouterr().out
    meta = _png_text(png.read_bytes())
    assert "matplotlib" in meta["Software"].lower()
    assert meta["size"] == (640, 480)


def test_info_plot_without_matplotlib_says_how_to_install_it(tmp_path, ds, capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what a missing package looks like to import
    png = tmp_path / "lengths.png"
    assert main(["info", str(ds), "--plot", str(png)]) == 1
    err = capsys.readouterr().err
    assert 'pip install "chatdata[plot]"' in err and "matplotlib" in err
    assert not png.exists()
