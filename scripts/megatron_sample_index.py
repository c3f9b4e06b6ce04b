#!/usr/bin/python3
"""One epoch's indices of a Megatron GPT dataset, with numpy alone and as
vectorized as numpy allows: the peer that shards.Megatron's index build
is timed against (BenchmarkMegatronSampleIndex, issue 25) and checked
against (TestMegatronSampleIndexNumpy).

The algorithm is shards' MegatronDataset.build, which is Megatron-LM's
for one epoch (gpt_dataset.py _build_document_sample_shuffle_indices,
helpers.cpp build_sample_idx with add_extra_token_to_sequence and
drop_last_partial_sequence):

  1. the document order: every sequence of the .idx once, shuffled;
  2. the sample index: the documents in that order as one stream of
     tokens, cut every SEQ tokens; row k is (position in the order,
     offset in that document) of token k*SEQ, for k in 0..n with
     n = (tokens-1)//SEQ, row 0 being (0, 0);
  3. the sample order: a permutation of the n samples.

helpers.cpp walks the documents one by one; here step 2 is a cumulative
sum of the lengths in order and one searchsorted of all the cut points:
token g lies in the first document whose cumulative end is past g (which
skips empty documents, as the walk does). The shuffles are numpy's: a
Generator (PCG64, numpy's fastest) by default, or Megatron's
RandomState(seed) (MT19937) with --randomstate; shards shuffles with
math/rand/v2's PCG, so the orders differ and the costs are alike.

  megatron_sample_index.py time LENGTHS SEQ SEED [--randomstate]
      build the three indices from the sequence lengths in the file
      LENGTHS (little-endian int32, one a sequence) and print the
      seconds it took, the file read excluded, as JSON
      {"seconds": s, "samples": n}
  megatron_sample_index.py index LENGTHS ORDER SEQ
      print the sample index (flat, JSON) for the document order in the
      file ORDER (little-endian int32)
"""

import json
import sys
import time

import numpy


def sample_index(lengths, order, seq_length):
    """Step 2: (n+1) rows of (position in order, offset), int64."""
    in_order = lengths[order].astype(numpy.int64)
    ends = numpy.cumsum(in_order)
    n = (int(ends[-1]) - 1) // seq_length
    cuts = numpy.arange(n + 1, dtype=numpy.int64) * seq_length
    at = numpy.searchsorted(ends, cuts, side="right")
    out = numpy.empty((n + 1, 2), dtype=numpy.int64)
    out[:, 0] = at
    out[:, 1] = cuts - (ends[at] - in_order[at])
    out[0] = 0
    return out


def build(lengths, seq_length, seed, randomstate=False):
    """Steps 1 to 3: the document order, sample index and sample order."""
    rng = numpy.random.RandomState(seed) if randomstate else numpy.random.default_rng(seed)
    order = numpy.arange(len(lengths), dtype=numpy.int32)
    rng.shuffle(order)
    idx = sample_index(lengths, order, seq_length)
    shuffle = numpy.arange(len(idx) - 1, dtype=numpy.int64)
    rng.shuffle(shuffle)
    return order, idx, shuffle


def main():
    cmd = sys.argv[1]
    if cmd == "time":
        lengths = numpy.fromfile(sys.argv[2], dtype="<i4")
        seq_length, seed = int(sys.argv[3]), int(sys.argv[4])
        start = time.perf_counter()
        _, idx, _ = build(lengths, seq_length, seed, "--randomstate" in sys.argv[5:])
        took = time.perf_counter() - start
        json.dump({"seconds": took, "samples": len(idx) - 1}, sys.stdout)
    elif cmd == "index":
        lengths = numpy.fromfile(sys.argv[2], dtype="<i4")
        order = numpy.fromfile(sys.argv[3], dtype="<i4")
        json.dump(sample_index(lengths, order, int(sys.argv[4])).reshape(-1).tolist(), sys.stdout)
    else:
        sys.exit("usage: megatron_sample_index.py time LENGTHS SEQ SEED [--randomstate] | index LENGTHS ORDER SEQ")


if __name__ == "__main__":
    main()
