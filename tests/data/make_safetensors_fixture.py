#!/usr/bin/env python3
"""Writes python_written.safetensors beside this script with nothing but json + numpy.

It is an independent writer of the format, so ember's reader is checked against a file it
did not write itself (tests/core/test_safetensors.cpp, "python fixture"). Regenerate with
    python3 tests/data/make_safetensors_fixture.py
(Debian: python3-numpy). The output is deterministic.

Unlike ember's writer, this one orders the data section differently from the header
(largest alignment first, then by name, as the reference implementation does), so the
reader's "tensors in data-offset order" rule is exercised.
"""
import json
import os
import struct

import numpy as np


def bf16_bits(values):
    """float32 -> bfloat16 bit patterns (round to nearest even), as uint16."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


TENSORS = {
    # name: (safetensors dtype, array)
    "weight": ("F32", np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1.0),
    "bias": ("F64", np.array([1.0 / 3.0, -2.5e-300, 1e300], dtype=np.float64)),
    "labels": ("I64", np.array([0, -1, 2**40, -(2**62)], dtype=np.int64)),
    "counts": ("I32", np.array([[7], [-8]], dtype=np.int32)),
    "pixels": ("U8", np.array([[[0, 127, 255]]], dtype=np.uint8)),
    "mask": ("BOOL", np.array([True, False, True], dtype=np.bool_)),
    "half": ("F16", np.array([1.0, -2.0, 0.099975586, 65504.0], dtype=np.float16)),
    "brain": ("BF16", bf16_bits([1.0, -3.0, 0.15625, 3.0e38])),
    "scalar": ("F32", np.array(42.25, dtype=np.float32)),     # 0-d
    "empty": ("F32", np.zeros((0, 4), dtype=np.float32)),      # no elements
}
METADATA = {"format": "pt", "written_by": "make_safetensors_fixture.py", "note": "caf\u00e9 \u2603"}
ALIGNMENT = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "F16": 2, "BF16": 2, "U8": 1, "BOOL": 1}


def main():
    order = sorted(TENSORS, key=lambda n: (-ALIGNMENT[TENSORS[n][0]], n))
    header, chunks, offset = {"__metadata__": METADATA}, [], 0
    for name in order:
        dtype, array = TENSORS[name]
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    # Header keys in name order, unlike the data order above.
    header = {"__metadata__": METADATA, **{n: header[n] for n in sorted(TENSORS)}}
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_written.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)
    print(f"wrote {path}: {8 + len(text) + offset} bytes")


if __name__ == "__main__":
    main()
