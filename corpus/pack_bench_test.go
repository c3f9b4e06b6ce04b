package corpus

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// BenchmarkPackedVsSequences loads epochs of the same Megatron corpus
// (5,000 documents of Zipf-like lengths, uint16 tokens) as packed
// sequences of 2048 tokens (Pack) and as Megatron's sample sequences of
// 2049 (Megatron, Out int64 like Pack's tokens), through a loader on the
// cpu backend (batch 8), in turn: an iteration is an epoch of each, the
// one that goes first alternating. It reports sequences a second of each
// (over all rounds), the median of the rounds' ratios packed ÷ sequences
// (issue 25's row "packed sequences per second ÷ sample sequences per
// second") and logs every round's.
func BenchmarkPackedVsSequences(b *testing.B) {
	const seqLen = 2048
	docs := zipfDocs(7, 5000, 8192)
	for d := range docs {
		for x := range docs[d] {
			docs[d][x] %= 50000
		}
	}
	prefix := filepath.Join(b.TempDir(), "corpus")
	if err := WriteMegatron(prefix, collate.Uint16, docs); err != nil {
		b.Fatal(err)
	}
	m, err := Megatron(prefix, MegatronConfig{SeqLength: seqLen, Seed: 1, Out: collate.Int64})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	p, err := Pack(m, PackConfig{SeqLen: seqLen, AddEOD: true, EOD: 0, PadToken: 0})
	if err != nil {
		b.Fatal(err)
	}
	for _, workers := range []int{0, 1} {
		b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) {
			epoch := func(ds engine.Dataset, e int) time.Duration {
				l, err := engine.New(ds, engine.Config{BatchSize: 8, Workers: workers, WorldSize: 1, Backend: "cpu"})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				start := time.Now()
				for _, err := range l.Epoch(context.Background(), e) {
					if err != nil {
						b.Fatal(err)
					}
				}
				return time.Since(start)
			}
			var packed, sequences time.Duration
			var ratios []float64
			for e := 0; b.Loop(); e++ {
				var tp, tw time.Duration
				if e%2 == 0 {
					tp = epoch(p, e)
					tw = epoch(m, e)
				} else {
					tw = epoch(m, e)
					tp = epoch(p, e)
				}
				packed, sequences = packed+tp, sequences+tw
				ratios = append(ratios, (float64(p.Len())/tp.Seconds())/(float64(m.Len())/tw.Seconds()))
			}
			b.Logf("packed ÷ sequences, sequences a second, by round: %.3f", ratios)
			n := float64(b.N)
			b.ReportMetric(n*float64(p.Len())/packed.Seconds(), "packed-seqs/s")
			b.ReportMetric(n*float64(m.Len())/sequences.Seconds(), "sequences-seqs/s")
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "x-sequences")
			b.ReportMetric(0, "ns/op")
		})
	}
}
