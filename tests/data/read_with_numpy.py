#!/usr/bin/env python3
"""Reads a safetensors file (an ember checkpoint, say) with nothing but json + numpy.

    python3 tests/data/read_with_numpy.py run/last.safetensors

Prints the metadata (decoding ember's JSON-valued entries) and each tensor's dtype, shape and
first values; exits non-zero if the file breaks the format. It is the proof that ember's files
need no ember (and no safetensors package) to be read.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "u1", "BOOL": "?",
          "BF16": "<u2"}  # bf16 as raw bit patterns: numpy has no bfloat16


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors, end = {}, 0
    for name, entry in header.items():
        begin, stop = entry["data_offsets"]
        array = np.frombuffer(data[begin:stop], dtype=DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"])
        end = max(end, stop)
    assert end == len(data), f"{len(data) - end} trailing bytes in the data section"
    return metadata, tensors


def main():
    metadata, tensors = read(sys.argv[1])
    for key, value in metadata.items():
        try:
            value = json.loads(value)
        except ValueError:
            pass
        print(f"metadata {key}: {value}")
    for name, array in tensors.items():
        print(f"{name}: {array.dtype} {list(array.shape)} {array.ravel()[:4]}")
    print(f"{len(tensors)} tensors")


if __name__ == "__main__":
    main()
