"""Dumps a GGUF file as the `gguf` package reads it, as JSON on stdout.

usage: gguf_dump.py FILE [--data]   (--data: include every tensor's bytes as hex)

Metadata: [key, [type names as gguf lists them: outer first, nested arrays flattened],
contents()]. Tensors: name, shape (ggml order), type name, absolute data offset, n_bytes.
"""
import json
import sys

import gguf

path = sys.argv[1]
with_data = "--data" in sys.argv[2:]
reader = gguf.GGUFReader(path)
meta = []
for key, field in reader.fields.items():
    if key.startswith("GGUF."):
        continue  # header pseudo-fields
    meta.append([key, [gguf.GGUFValueType(t).name for t in field.types], field.contents()])
tensors = []
for t in reader.tensors:
    entry = {
        "name": t.name,
        "shape": [int(d) for d in t.shape],
        "type": t.tensor_type.name,
        "data_offset": int(t.data_offset),
        "n_bytes": int(t.n_bytes),
    }
    if with_data:
        entry["data"] = t.data.tobytes().hex()
    tensors.append(entry)
version = int(reader.fields["GGUF.version"].parts[-1][0])
json.dump({"version": version, "alignment": int(reader.alignment), "metadata": meta,
           "tensors": tensors}, sys.stdout)
