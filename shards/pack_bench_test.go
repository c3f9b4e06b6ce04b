package shards

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// BenchmarkPackedVsWindows loads one epoch of the same Megatron corpus
// (5,000 documents of Zipf-like lengths, uint16 tokens) as packed
// sequences of 2048 tokens (Pack) and as Megatron's sample windows of
// 2049 (Megatron), through a loader on the cpu backend, and reports
// sequences a second and tokens a second of each.
func BenchmarkPackedVsWindows(b *testing.B) {
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
	for _, bc := range []struct {
		name string
		ds   engine.Dataset
	}{{"packed", p}, {"windows", m}} {
		for _, workers := range []int{0, 2} {
			b.Run(bc.name+"/workers="+strconv.Itoa(workers), func(b *testing.B) {
				l, err := engine.New(bc.ds, engine.Config{BatchSize: 8, Workers: workers, WorldSize: 1, Backend: "cpu"})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				n := 0
				for b.Loop() {
					for _, err := range l.Epoch(context.Background(), 0) {
						if err != nil {
							b.Fatal(err)
						}
					}
					n += bc.ds.Len()
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "seqs/s")
				b.ReportMetric(float64(n)*seqLen/b.Elapsed().Seconds()/1e6, "Mtokens/s")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkBlendBuild builds the index of a blend of three datasets.
func BenchmarkBlendBuild(b *testing.B) {
	ds := []engine.Dataset{corpus(0, 1000), corpus(1, 1000), corpus(2, 1000)}
	for _, size := range []int{1e5, 1e6} {
		b.Run("size="+strconv.Itoa(size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Blend(BlendConfig{Weights: []float64{0.7, 0.2, 0.1}, Size: size}, ds...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
