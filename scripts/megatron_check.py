#!/usr/bin/python3
"""An independent peer for shards.Megatron, written from the format of
Megatron-LM's indexed datasets (megatron/core/datasets/indexed_dataset.py)
and its sample index (helpers.cpp build_sample_idx), with numpy alone.

  megatron_check.py write PREFIX DTYPE SEED   write a generated corpus
  megatron_check.py read PREFIX               print the corpus as JSON
  megatron_check.py samples PREFIX ORDER SEQ  print the sample index and
      every sample's tokens (JSON) for the document order in the text
      file ORDER (sequence numbers, whitespace separated)
  megatron_check.py check PREFIX SEQ ORDER...  read and samples in one
      run: {"corpus": read's output, "orders": [samples' output, ...]}

The .idx: b"MMIDIDX\\x00\\x00", version <u8 (1), dtype code <u1,
sequence count <u8, document count <u8, then the sequence lengths (<i4),
the sequence pointers (<i8, byte offsets into the .bin) and the document
indices (<i8, the sequence where each document starts, then the count).
"""

import json
import struct
import sys

import numpy

MAGIC = b"MMIDIDX\x00\x00"
CODES = {1: numpy.uint8, 2: numpy.int8, 3: numpy.int16, 4: numpy.int32,
         5: numpy.int64, 6: numpy.float64, 7: numpy.float32, 8: numpy.uint16}
NAMES = {numpy.dtype(t).name: c for c, t in CODES.items()}


def write(prefix, dtype, seed):
    """A corpus of documents of one or more sequences (as with
    --split-sentences), some sequences empty, tokens spanning the dtype."""
    rng = numpy.random.RandomState(seed)
    dt = numpy.dtype(dtype)
    info = numpy.iinfo(dt)
    lo, hi = max(info.min, -30000), min(info.max, 60000)
    lengths, docs = [], [0]
    chunks = []
    for _ in range(40):
        for _ in range(rng.randint(1, 4)):
            n = int(rng.choice([0, 1, 2, 5, 17, 60, 200]))
            chunks.append(rng.randint(lo, hi + 1, size=n).astype(dt))
            lengths.append(n)
        docs.append(len(lengths))
    lengths = numpy.array(lengths, dtype=numpy.int32)
    pointers = numpy.concatenate([[0], numpy.cumsum(lengths.astype(numpy.int64) * dt.itemsize)[:-1]]).astype(numpy.int64)
    with open(prefix + ".bin", "wb") as f:
        for c in chunks:
            f.write(c.astype(dt.newbyteorder("<")).tobytes())
    with open(prefix + ".idx", "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", NAMES[dt.name]))
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(docs)))
        f.write(lengths.astype("<i4").tobytes())
        f.write(pointers.astype("<i8").tobytes())
        f.write(numpy.array(docs, dtype="<i8").tobytes())


def read(prefix):
    """The corpus: the index's arrays and every sequence's tokens."""
    with open(prefix + ".idx", "rb") as f:
        data = f.read()
    assert data[:9] == MAGIC, "magic"
    (version,) = struct.unpack_from("<Q", data, 9)
    assert version == 1, "version"
    dt = numpy.dtype(CODES[data[17]]).newbyteorder("<")
    nseq, ndoc = struct.unpack_from("<QQ", data, 18)
    off = 34
    lengths = numpy.frombuffer(data, "<i4", nseq, off)
    off += 4 * nseq
    pointers = numpy.frombuffer(data, "<i8", nseq, off)
    off += 8 * nseq
    docs = numpy.frombuffer(data, "<i8", ndoc, off)
    binary = numpy.fromfile(prefix + ".bin", dtype=numpy.uint8)
    seqs = []
    for p, n in zip(pointers, lengths):
        seqs.append(numpy.frombuffer(binary[p : p + n * dt.itemsize].tobytes(), dt).astype(numpy.int64))
    return dt, lengths, pointers, docs, seqs


def build_sample_idx(lengths, order, seq_length):
    """helpers.cpp build_sample_idx for one epoch, add_extra_token 1,
    drop_last_partial_sequence: rows (index into order, offset)."""
    tokens = int(numpy.sum(lengths[order].astype(numpy.int64)))
    n = (tokens - 1) // seq_length
    out = numpy.zeros((n + 1, 2), dtype=numpy.int64)
    at, off = 0, 0
    for k in range(1, n + 1):
        remaining = seq_length + 1
        while remaining != 0:
            length = int(lengths[order[at]]) - off
            remaining -= length
            if remaining <= 0:
                off += remaining + length - 1
                remaining = 0
            else:
                if at == len(order) - 1:
                    assert k == n
                    off = int(lengths[order[at]]) - 1
                    break
                at += 1
                off = 0
        out[k] = (at, off)
    return out


def sample_tokens(seqs, order, sample_idx, k, seq_length):
    """GPTDataset._query_document_sample_shuffle_indices, unshuffled."""
    beg, beg_off = sample_idx[k]
    end, end_off = sample_idx[k + 1]
    if beg == end:
        parts = [seqs[order[beg]][beg_off : end_off + 1]]
    else:
        parts = []
        for i in range(beg, end + 1):
            o = 0 if i > beg else beg_off
            s = seqs[order[i]]
            parts.append(s[o:] if i < end else s[o : end_off + 1])
    text = numpy.concatenate(parts)
    assert len(text) == seq_length + 1, (k, len(text))
    return text


def corpus(prefix):
    dt, lengths, pointers, docs, seqs = read(prefix)
    return {"dtype": dt.name, "lengths": lengths.tolist(), "pointers": pointers.tolist(),
            "documents": docs.tolist(), "sequences": [s.tolist() for s in seqs]}


def samples(prefix, order_path, seq_length):
    _, lengths, _, _, seqs = read(prefix)
    order = numpy.loadtxt(order_path, dtype=numpy.int64, ndmin=1)
    idx = build_sample_idx(lengths, order, seq_length)
    rows = [sample_tokens(seqs, order, idx, k, seq_length).tolist() for k in range(len(idx) - 1)]
    return {"sample_index": idx.reshape(-1).tolist(), "samples": rows}


def main():
    cmd = sys.argv[1]
    if cmd == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "read":
        json.dump(corpus(sys.argv[2]), sys.stdout)
    elif cmd == "samples":
        json.dump(samples(sys.argv[2], sys.argv[3], int(sys.argv[4])), sys.stdout)
    elif cmd == "check":
        seq_length = int(sys.argv[3])
        json.dump({"corpus": corpus(sys.argv[2]),
                   "orders": [samples(sys.argv[2], p, seq_length) for p in sys.argv[4:]]}, sys.stdout)
    else:
        sys.exit("usage: megatron_check.py write|read|samples ...")


if __name__ == "__main__":
    main()
