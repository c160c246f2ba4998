"""Writes a GGUF file with the `gguf` package's own writer, covering every value type.

usage: gguf_write.py OUT_FILE
The Rust test reads OUT_FILE and compares with gguf_dump.py's view of it.
"""
import sys

import gguf
import numpy as np

out = sys.argv[1]
w = gguf.GGUFWriter(out, arch="llama")
w.add_uint8("t.u8", 250)
w.add_int8("t.i8", -7)
w.add_uint16("t.u16", 65000)
w.add_int16("t.i16", -30000)
w.add_uint32("t.u32", 4_000_000_000)
w.add_int32("t.i32", -2_000_000_000)
w.add_uint64("t.u64", 2**63 + 5)
w.add_int64("t.i64", -(2**62))
w.add_float32("t.f32", 0.1)
w.add_float64("t.f64", -1e-300)
w.add_bool("t.bool", True)
w.add_string("t.str", "héllo ✓")
w.add_array("t.strs", ["a", "", "ü"])
w.add_array("t.ints", [1, -2, 3])
w.add_array("t.floats", [0.5, -1.25])
w.add_custom_alignment(64)
rng = np.random.default_rng(0)
w.add_tensor("f32", rng.standard_normal((3, 5)).astype(np.float32))
w.add_tensor("f16", rng.standard_normal((2, 7)).astype(np.float16))
q = rng.integers(0, 256, size=(2, 3 * 20), dtype=np.uint8)  # 2 rows of 96 Q4_1 elements
w.add_tensor("q4_1", q, raw_shape=(2, 60), raw_dtype=gguf.GGMLQuantizationType.Q4_1)
w.add_tensor("scalar_row", np.array([7.0], dtype=np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
