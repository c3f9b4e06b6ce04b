package shards

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// tarMember is one member of a test tar.
type tarMember struct {
	name string
	data []byte
	typ  byte // 0: a regular file
}

// tarBytes returns a tar of members, with its end-of-archive blocks.
func tarBytes(t testing.TB, members ...tarMember) []byte {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, m := range members {
		h := &tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg}
		switch m.typ {
		case 0:
		case tar.TypeXGlobalHeader: // as git archive writes one first
			h = &tar.Header{Typeflag: m.typ, PAXRecords: map[string]string{"comment": m.name}}
		default:
			h.Typeflag, h.Size = m.typ, 0
		}
		require.NoError(t, w.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := w.Write(m.data)
			require.NoError(t, err)
		}
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// payload is the .bin member of sample id: 1 to 3000 bytes that depend
// on id.
func payload(id int) []byte {
	b := make([]byte, 1+(id*7919)%3000)
	for i := range b {
		b[i] = byte(id*31 + i*7)
	}
	return b
}

// sampleMembers are the members of sample id: .cls (the id as text), .bin
// and .json.
func sampleMembers(id int) []tarMember {
	key := fmt.Sprintf("s%06d", id)
	return []tarMember{
		{name: key + ".cls", data: []byte(fmt.Sprint(id))},
		{name: key + ".bin", data: payload(id)},
		{name: key + ".json", data: fmt.Appendf(nil, `{"id":%d}`, id)},
	}
}

// writeShards writes len(counts) WebDataset shards into dir, shard i
// holding counts[i] samples with consecutive ids from 0, and returns
// their paths and the brace pattern naming them.
func writeShards(t testing.TB, dir string, counts ...int) (paths []string, pattern string) {
	id := 0
	for i, n := range counts {
		var ms []tarMember
		for range n {
			ms = append(ms, sampleMembers(id)...)
			id++
		}
		p := filepath.Join(dir, fmt.Sprintf("train-%04d.tar", i))
		require.NoError(t, os.WriteFile(p, tarBytes(t, ms...), 0o644))
		paths = append(paths, p)
	}
	return paths, filepath.Join(dir, fmt.Sprintf("train-{0000..%04d}.tar", len(counts)-1))
}

// testSchema is what decodeTest writes: the id from .cls, the first 64
// bytes of .bin and its length, and a draw of the sample's RNG.
var testSchema = collate.Schema{
	{Name: "id", DType: collate.Int64},
	{Name: "bin", DType: collate.Uint8, Shape: []int{64}},
	{Name: "len", DType: collate.Int32},
	{Name: "noise", DType: collate.Float32},
}

func decodeTest(_ context.Context, rec engine.Record, s *engine.Slot) error {
	id, err := Int(rec, "cls")
	if err != nil {
		return err
	}
	if id != int64(s.Index()) {
		return fmt.Errorf("record %s/%s has id %d, slot index %d", rec.Shard, rec.Key, id, s.Index())
	}
	b, err := Field(rec, "bin")
	if err != nil {
		return err
	}
	collate.As[int64](s.Tensor("id"))[0] = id
	copy(s.Tensor("bin").Bytes(), b)
	collate.As[int32](s.Tensor("len"))[0] = int32(len(b))
	collate.As[float32](s.Tensor("noise"))[0] = float32(s.Rand().NormFloat64())
	return nil
}

// batches runs an epoch of l and returns every batch's indices and bytes.
func batches(t testing.TB, l *engine.Loader, epoch int) (ids [][]int, data [][]byte, err error) {
	for b, err := range l.Epoch(context.Background(), epoch) {
		if err != nil {
			return ids, data, err
		}
		ids = append(ids, b.Indices())
		var all []byte
		for _, f := range testSchema {
			all = append(all, b.Tensor(f.Name).Bytes()...)
		}
		data = append(data, all)
	}
	return ids, data, nil
}
