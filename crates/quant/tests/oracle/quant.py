"""Reference quantization with the gguf package.

usage: quant.py DIR
DIR/manifest.json lists [{"name": ..., "type": "Q4_1"}]; for each, reads DIR/<name>.f32
(little-endian float32) and writes DIR/<name>.q = gguf.quants.quantize(data, type) bytes.
"""
import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, quants


def main() -> None:
    out_dir = Path(sys.argv[1])
    for item in json.loads((out_dir / "manifest.json").read_text()):
        data = np.fromfile(out_dir / f"{item['name']}.f32", dtype="<f4").astype(np.float32)
        q = quants.quantize(data, GGMLQuantizationType[item["type"]])
        np.ascontiguousarray(q).view(np.uint8).tofile(out_dir / f"{item['name']}.q")


if __name__ == "__main__":
    main()
