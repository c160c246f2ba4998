"""Reference dequantization with the gguf package.

usage: dequant.py DIR
DIR/manifest.json lists [{"name": ..., "type": "Q4_1"}]; for each, reads DIR/<name>.bin (raw
blocks) and writes DIR/<name>.f32 (little-endian float32) = gguf.quants.dequantize.
Q8_K is not in the gguf package; its reference is computed here with the same f32 arithmetic
as ggml's dequantize_row_q8_K (f32 d times int8 q).
"""
import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, quants


def q8_k(raw: np.ndarray) -> np.ndarray:
    blocks = raw.reshape(-1, 292)
    d = blocks[:, :4].copy().view("<f4").astype(np.float32)
    q = blocks[:, 4:260].copy().view(np.int8).astype(np.float32)
    return (d * q).reshape(-1)


def main() -> None:
    out_dir = Path(sys.argv[1])
    for item in json.loads((out_dir / "manifest.json").read_text()):
        raw = np.fromfile(out_dir / f"{item['name']}.bin", dtype=np.uint8)
        if item["type"] == "Q8_K":
            ref = q8_k(raw)
        else:
            qtype = GGMLQuantizationType[item["type"]]
            ref = quants.dequantize(raw, qtype).astype(np.float32, copy=False).reshape(-1)
        ref.astype("<f4").tofile(out_dir / f"{item['name']}.f32")


if __name__ == "__main__":
    main()
