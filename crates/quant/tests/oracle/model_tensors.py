"""Raw bytes and reference dequantization of a few tensors of a GGUF model.

usage: model_tensors.py MODEL DIR
Writes DIR/<name>.bin (raw packed rows), DIR/<name>.f32 (gguf.quants.dequantize) and
DIR/manifest.json [{"name", "type", "rows", "cols"}]. Large tensors are cut to their first rows.
"""
import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFReader, quants

WANTED = [
    ("token_embd.weight", 2048),
    ("blk.0.ffn_down.weight", None),
    ("blk.0.attn_q.weight", None),
    ("blk.0.attn_k.weight", None),
    ("blk.29.ffn_up.weight", None),
    ("blk.0.attn_norm.weight", None),
    ("output_norm.weight", None),
]


def main() -> None:
    reader = GGUFReader(sys.argv[1])
    out_dir = Path(sys.argv[2])
    by_name = {t.name: t for t in reader.tensors}
    manifest = []
    for name, max_rows in WANTED:
        t = by_name[name]
        cols = int(t.shape[0])
        rows = int(np.prod(t.shape[1:])) if len(t.shape) > 1 else 1
        raw = np.ascontiguousarray(t.data).view(np.uint8).reshape(rows, -1)
        if max_rows is not None and rows > max_rows:
            rows, raw = max_rows, raw[:max_rows]
        ref = quants.dequantize(raw, t.tensor_type).astype(np.float32).reshape(-1)
        raw.tofile(out_dir / f"{name}.bin")
        ref.astype("<f4").tofile(out_dir / f"{name}.f32")
        manifest.append({"name": name, "type": t.tensor_type.name, "rows": rows, "cols": cols})
    (out_dir / "manifest.json").write_text(json.dumps(manifest))


if __name__ == "__main__":
    main()
