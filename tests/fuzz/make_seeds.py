#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets into tests/fuzz/corpus/<target>/ (standard library
only; deterministic, so rerunning it changes nothing). Seeds are small valid files that reach
each parser's success paths plus a few malformed ones naming what they break; regression
inputs (regression_*) are added by hand when the fuzzer finds something and are left alone.

    python3 tests/fuzz/make_seeds.py
"""
import gzip
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


# ---- json ------------------------------------------------------------------------------------
JSON_SEEDS = {
    "valid_object.json": '{"model": "mnist_mlp", "epochs": 3, "lr": 0.05, "nested": {"a": [1, 2, {"b": null}]}}',
    "valid_numbers.json": "[0, -0, 9223372036854775807, -9223372036854775808, 1.5, -2.5e-3, 1E+2, 1e-400, 0.1]",
    "valid_strings.json": r'["plain", "esc \" \\ \/ \b \f \n \r \t", "\u00e9\u4e2d\ud83d\ude00", "raw é中😀", ""]',
    "valid_literals.json": " [true, false, null, {}, []] \n",
    "valid_checkpoint_progress.json": '{"epoch": 3, "step": 1406, "counters": {"loader.batch": 12}}',
    "bad_trailing_comma.json": "[1, 2,]",
    "bad_duplicate_key.json": '{"a": 1, "a": 2}',
    "bad_lone_surrogate.json": r'["\ud800"]',
    "bad_leading_zero.json": "[01]",
    "bad_int_overflow.json": "[9223372036854775808]",
    "bad_double_overflow.json": "[1e400]",
    "bad_deep.json": "[" * 100 + "]" * 100,
    "bad_trailing_garbage.json": "{} x",
}
for name, text in JSON_SEEDS.items():
    put("json", name, text)
put("json", "bad_invalid_utf8.json", b'["\xc3\x28"]')


# ---- safetensors -----------------------------------------------------------------------------
def safetensors(tensors, metadata=None, raw_header=None):
    """tensors: [(name, dtype, shape, bytes)] laid out in order."""
    header, payload = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(payload), len(payload) + len(data)]}
        payload += data
    text = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + payload


f32_2x3 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
put("safetensors", "valid_f32_with_metadata.safetensors",
    safetensors([("fc.weight", "F32", [2, 3], f32_2x3)], {"format": "pt", "note": "seed"}))
put("safetensors", "valid_every_dtype.safetensors", safetensors([
    ("a", "F64", [2], struct.pack("<2d", 1.5, -2)),
    ("b", "I64", [1], struct.pack("<q", -7)),
    ("c", "I32", [3], struct.pack("<3i", 1, 2, 3)),
    ("d", "U8", [2, 2], bytes([0, 1, 254, 255])),
    ("e", "BOOL", [3], bytes([1, 0, 1])),
    ("f", "BF16", [2], bytes([0x80, 0x3f, 0, 0x40])),
    ("g", "F16", [1], bytes([0, 0x3c])),
]))
put("safetensors", "valid_empty_and_scalar.safetensors", safetensors([
    ("empty", "F32", [0, 5], b""), ("scalar", "F32", [], struct.pack("<f", 3)), ("zero_dim", "I64", [3, 0], b"")]))
put("safetensors", "valid_no_tensors.safetensors", safetensors([], {"k": "v"}))
put("safetensors", "valid_checkpoint.safetensors", safetensors(
    [("model.fc.bias", "F32", [2], struct.pack("<2f", 0.5, -0.5)), ("optimizer.step", "I64", [], struct.pack("<q", 3))],
    {"format": "ember.training_checkpoint.v1", "progress": '{"epoch":1,"step":10,"counters":{}}',
     "rng": '{"default":{"seed":"42","offset":"8"}}', "config": "{}"}))
put("safetensors", "bad_header_length.safetensors", struct.pack("<Q", 1 << 40) + b"{}")
put("safetensors", "bad_overlap.safetensors", safetensors([], raw_header=json.dumps(
    {"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}, "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}}))
    + b"\0\0\0")
put("safetensors", "bad_unsupported_dtype.safetensors", safetensors([("x", "F8_E4M3", [2], b"\0\0")]))
put("safetensors", "bad_bool_byte.safetensors", safetensors([("x", "BOOL", [2], b"\x01\x02")]))
put("safetensors", "bad_shape_overflow.safetensors", safetensors([], raw_header=json.dumps(
    {"x": {"dtype": "F64", "shape": [1 << 62, 4], "data_offsets": [0, 0]}})))


# ---- idx and gzip ----------------------------------------------------------------------------
def idx(dims, data, elem_type=0x08):
    return bytes([0, 0, elem_type, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


labels = idx([5], [3, 1, 4, 1, 5])
images = idx([2, 4, 4], [(i * 37) % 256 for i in range(32)])
IDX_SEEDS = {
    "valid_labels.idx": labels,
    "valid_images.idx": images,
    "valid_empty.idx": idx([0, 0x01020304], []),
    "bad_trailing_byte.idx": labels + b"\0",
    "bad_truncated.idx": images[:-3],
    "bad_f32_type.idx": idx([1], [0, 0, 0, 0], 0x0D),
    "bad_count_overflow.idx": idx([0xFFFFFFFF] * 3, []),
}
for name, data in IDX_SEEDS.items():
    put("idx", name, data)

put("gzip", "valid_labels.idx.gz", gz(labels))
put("gzip", "valid_images.idx.gz", gz(images))
put("gzip", "valid_plain_passthrough.idx", labels)
put("gzip", "valid_two_members.idx.gz", gz(images[:10]) + gz(images[10:]))
put("gzip", "valid_stored_block.idx.gz", gzip.compress(images, compresslevel=0, mtime=0))
put("gzip", "bad_bomb_past_promise.idx.gz", gz(labels + bytes(20000)))
put("gzip", "bad_truncated_stream.idx.gz", gz(images)[:-12])
put("gzip", "bad_crc.idx.gz", gz(images)[:-8] + b"\0\0\0\0" + gz(images)[-4:])
put("gzip", "bad_trailing_garbage.idx.gz", gz(labels) + b"garbage")
put("gzip", "bad_liar_header.idx.gz", gz(idx([1 << 20, 1 << 20], [3] * 64)))


# ---- checkpoint metadata: lines progress, rng, config[, format[, history]] (fuzz_checkpoint.cpp) --
CHECKPOINT_SEEDS = {
    "valid_full": ['{"epoch":3,"step":1406,"counters":{"loader.batch":12,"loader.epoch":3}}',
                   '{"default":{"seed":"42","offset":"1234"},"loader":{"seed":"18446744073709551615","offset":"0"}}',
                   '{"model":"mnist_mlp","lr":0.05,"epochs":[1,2]}'],
    "valid_empty_maps": ['{"epoch":0,"step":0,"counters":{}}', "{}", "{}", "ember.training_checkpoint.v1"],
    "bad_negative_epoch": ['{"epoch":-1,"step":0,"counters":{}}', "{}", "{}"],
    "bad_seed_as_integer": ['{"epoch":1,"step":1,"counters":{}}', '{"default":{"seed":1,"offset":"0"}}', "{}"],
    "bad_seed_overflow": ['{"epoch":1,"step":1,"counters":{}}', '{"default":{"seed":"18446744073709551616","offset":"0"}}', "{}"],
    "bad_counters_array": ['{"epoch":1,"step":1,"counters":[]}', "{}", "{}"],
    "bad_config_not_json": ['{"epoch":1,"step":1,"counters":{}}', "{}", "{not json"],
    "bad_format": ['{"epoch":1,"step":1,"counters":{}}', "{}", "{}", "ember.training_checkpoint.v0"],
    "bad_missing_rng": ['{"epoch":1,"step":1,"counters":{}}'],
    "valid_history": ['{"epoch":1,"step":1,"counters":{}}', "{}", "{}", "ember.training_checkpoint.v1",
                      '[{"epoch":1,"train_loss":0.5,"scores":{"acc":0.9},"seconds":2,"lr":0.1}]'],
    "bad_history_object": ['{"epoch":1,"step":1,"counters":{}}', "{}", "{}", "ember.training_checkpoint.v1",
                           '{"epoch":1}'],
}
for name, lines in CHECKPOINT_SEEDS.items():
    put("checkpoint", name + ".txt", "\n".join(lines))

# ---- run history: a checkpoint's per-epoch records (fuzz_run_log.cpp) ---------------------------
RECORD = '{"epoch":%d,"train_loss":0.5,"test_loss":0.25,"scores":{"test_accuracy":0.9},"seconds":41.5,"lr":0.05}'
RUN_LOG_SEEDS = {
    "valid_two_epochs.json": "[" + RECORD % 1 + "," + RECORD % 2 + "]",
    "valid_metric_no_test_loss.json":
        '[{"epoch":1,"train_loss":0.7,"scores":{"precision_at_1":0.9,"map_at_r":0.7},"seconds":3,"lr":0.001}]',
    "valid_diverged.json": '[{"epoch":1,"train_loss":"nan","test_loss":"inf","scores":{"acc":"-inf"},"seconds":1,"lr":0.1}]',
    "valid_empty.json": "[]",
    "bad_epochs_repeat.json": "[" + RECORD % 2 + "," + RECORD % 2 + "]",
    "bad_columns_differ.json": "[" + RECORD % 1 + ',{"epoch":2,"train_loss":1,"scores":{},"seconds":1,"lr":0}]',
    "bad_not_array.json": RECORD % 1,
}
for name, text in RUN_LOG_SEEDS.items():
    put("run_log", name, text)
