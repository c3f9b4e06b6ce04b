package corpus

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
)

// writeMegatronInMemory is WriteMegatron as it was before the streaming
// writer: the whole .bin and .idx built in memory. The writer must write
// the same bytes.
func writeMegatronInMemory(prefix string, dtype collate.DType, documents [][]int64) error {
	code, _ := megatronCode(dtype)
	var bin []byte
	var lengths []int32
	var pointers []int64
	for _, doc := range documents {
		pointers = append(pointers, int64(len(bin)))
		lengths = append(lengths, int32(len(doc)))
		for _, v := range doc {
			switch dtype.Size() {
			case 1:
				bin = append(bin, byte(v))
			case 2:
				bin = binary.LittleEndian.AppendUint16(bin, uint16(v))
			case 4:
				bin = binary.LittleEndian.AppendUint32(bin, uint32(v))
			case 8:
				bin = binary.LittleEndian.AppendUint64(bin, uint64(v))
			}
		}
	}
	idx := append([]byte(nil), megatronMagic...)
	idx = binary.LittleEndian.AppendUint64(idx, 1)
	idx = append(idx, code)
	idx = binary.LittleEndian.AppendUint64(idx, uint64(len(documents)))
	idx = binary.LittleEndian.AppendUint64(idx, uint64(len(documents)+1))
	for _, n := range lengths {
		idx = binary.LittleEndian.AppendUint32(idx, uint32(n))
	}
	for _, p := range pointers {
		idx = binary.LittleEndian.AppendUint64(idx, uint64(p))
	}
	for i := range len(documents) + 1 {
		idx = binary.LittleEndian.AppendUint64(idx, uint64(i))
	}
	if err := os.WriteFile(prefix+".bin", bin, 0o644); err != nil {
		return err
	}
	return os.WriteFile(prefix+".idx", idx, 0o644)
}

// dirNames returns the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// WriteMegatron, now a MegatronWriter, writes the bytes that the
// in-memory writer wrote, for every dtype, with empty documents, long
// ones (past the writer's chunk of tokens) and none at all; and leaves
// no temporary file.
func TestMegatronWriterMatchesInMemory(t *testing.T) {
	t.Parallel()
	long := make([]int64, 40000)
	for i := range long {
		long[i] = int64(i % 120)
	}
	corpora := map[string][][]int64{
		"known": knownDocs(),
		"none":  nil,
		"empty": {{}, {}, {}},
		"long":  {{1, 2}, long, {}, {3}},
	}
	for _, dt := range megatronTypes {
		for name, docs := range corpora {
			if dt.Size() == 1 && name == "known" {
				continue // its tokens pass 255
			}
			t.Run(dt.String()+"/"+name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				want, got := filepath.Join(dir, "want"), filepath.Join(dir, "got")
				require.NoError(t, writeMegatronInMemory(want, dt, docs))
				require.NoError(t, WriteMegatron(got, dt, docs))
				for _, ext := range []string{".idx", ".bin"} {
					w, err := os.ReadFile(want + ext)
					require.NoError(t, err)
					g, err := os.ReadFile(got + ext)
					require.NoError(t, err)
					assert.Equal(t, w, g, ext)
				}
				assert.ElementsMatch(t, []string{"want.idx", "want.bin", "got.idx", "got.bin"}, dirNames(t, dir))
			})
		}
	}
}

// Documents of several sequences, and of none, as Megatron's
// add_document writes them: numpy reads the index and every sequence,
// and ReadMegatronIndex reads the same.
func TestMegatronWriterDocuments(t *testing.T) {
	t.Parallel()
	prefix := filepath.Join(t.TempDir(), "docs")
	w, err := NewMegatronWriter(prefix, collate.Int32)
	require.NoError(t, err)
	docs := [][][]int64{
		{{1, 2, 3}, {4}, {5, 6}},
		{},
		{{-7, math.MaxInt32}},
		{{}, {8}},
	}
	for _, d := range docs {
		require.NoError(t, w.AddDocument(d))
	}
	require.NoError(t, w.Add([]int64{9, 10}))
	assert.Equal(t, 5, w.Documents())
	assert.Equal(t, 7, w.Sequences())
	assert.Equal(t, int64(11), w.Tokens())
	assert.Equal(t, int64(44), w.Size())
	require.NoError(t, w.Close())
	require.NoError(t, w.Close(), "Close after Close does nothing")
	assert.ErrorContains(t, w.Add([]int64{1}), "closed")

	var peer struct {
		DType     string
		Lengths   []int32
		Pointers  []int64
		Documents []int64
		Sequences [][]int64
	}
	require.NoError(t, json.Unmarshal(megatronPeer(t, "read", prefix), &peer))
	assert.Equal(t, "int32", peer.DType)
	assert.Equal(t, []int32{3, 1, 2, 2, 0, 1, 2}, peer.Lengths)
	assert.Equal(t, []int64{0, 3, 3, 4, 6, 7}, peer.Documents)
	assert.Equal(t, [][]int64{{1, 2, 3}, {4}, {5, 6}, {-7, math.MaxInt32}, {}, {8}, {9, 10}}, peer.Sequences)

	x, err := ReadMegatronIndex(prefix)
	require.NoError(t, err)
	assert.Equal(t, collate.Int32, x.DType)
	assert.Equal(t, peer.Lengths, x.Lengths)
	assert.Equal(t, peer.Pointers, x.Pointers)
	assert.Equal(t, peer.Documents, x.Documents)
	assert.Equal(t, int64(44), x.BinSize)
}

// Abort, and a token that does not fit, leave no files and keep the
// corpus that was there before.
func TestMegatronWriterAbort(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prefix := filepath.Join(dir, "c")
	require.NoError(t, WriteMegatron(prefix, collate.Uint16, [][]int64{{1, 2}}))
	before, err := os.ReadFile(prefix + ".bin")
	require.NoError(t, err)

	w, err := NewMegatronWriter(prefix, collate.Uint16)
	require.NoError(t, err)
	require.NoError(t, w.Add([]int64{3, 4, 5}))
	require.NoError(t, w.Abort())
	assert.ElementsMatch(t, []string{"c.idx", "c.bin"}, dirNames(t, dir))
	assert.Error(t, w.Close(), "Close after Abort")

	w, err = NewMegatronWriter(prefix, collate.Uint16)
	require.NoError(t, err)
	require.NoError(t, w.Add([]int64{3}))
	err = w.AddDocument([][]int64{{4}, {5, 70000}})
	assert.EqualError(t, err, "corpus: MegatronWriter: document 1, token 1: 70000 does not fit uint16")
	assert.Equal(t, err, w.Add([]int64{1}), "the writer is done")
	assert.Equal(t, err, w.Close())
	assert.ElementsMatch(t, []string{"c.idx", "c.bin"}, dirNames(t, dir))

	err = WriteMegatron(prefix, collate.Uint8, [][]int64{{1}, {300}})
	assert.EqualError(t, err, "corpus: WriteMegatron: document 1, token 0: 300 does not fit uint8")
	assert.ElementsMatch(t, []string{"c.idx", "c.bin"}, dirNames(t, dir))
	after, err := os.ReadFile(prefix + ".bin")
	require.NoError(t, err)
	assert.Equal(t, before, after)

	_, err = NewMegatronWriter(prefix, collate.Float32)
	assert.ErrorContains(t, err, "dtype float32")
}

// A prefix that names a folder ("dir/", "."), which would write the
// hidden files dir/.idx and dir/.bin, is refused; a prefix in a folder
// that does not exist is an error naming the prefix, not a temporary
// file.
func TestMegatronWriterPrefix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, prefix := range []string{dir + string(filepath.Separator), dir + string(filepath.Separator) + ".", ".", ".."} {
		_, err := NewMegatronWriter(prefix, collate.Uint16)
		require.Error(t, err, "%q", prefix)
		assert.Contains(t, err.Error(), "names a folder", "%q", prefix)
	}
	assert.Empty(t, dirNames(t, dir))

	missing := filepath.Join(dir, "missing", "c")
	_, err := NewMegatronWriter(missing, collate.Uint16)
	require.Error(t, err)
	assert.Contains(t, err.Error(), missing+": ")
	assert.Contains(t, err.Error(), "no such file or directory")
	assert.NotContains(t, err.Error(), ".tmp-")
}

// A folder where PREFIX.idx or PREFIX.bin goes is refused when the
// writer starts, before any token is written, and should one appear
// before Close, Close fails leaving neither file of the writer (no
// PREFIX.bin without its PREFIX.idx) and no temporary file.
func TestMegatronWriterTargetIsAFolder(t *testing.T) {
	t.Parallel()
	for _, ext := range []string{".idx", ".bin"} {
		dir := t.TempDir()
		prefix := filepath.Join(dir, "c")
		require.NoError(t, os.Mkdir(prefix+ext, 0o755))
		_, err := NewMegatronWriter(prefix, collate.Uint16)
		require.Error(t, err, ext)
		assert.Contains(t, err.Error(), prefix+ext+" is a folder")
		assert.Equal(t, []string{"c" + ext}, dirNames(t, dir))

		require.NoError(t, os.Remove(prefix+ext))
		w, err := NewMegatronWriter(prefix, collate.Uint16)
		require.NoError(t, err)
		require.NoError(t, w.Add([]int64{1, 2}))
		require.NoError(t, os.Mkdir(prefix+ext, 0o755))
		err = w.Close()
		require.Error(t, err, ext)
		assert.Contains(t, err.Error(), prefix+ext+" is a folder")
		assert.Equal(t, []string{"c" + ext}, dirNames(t, dir), "only the folder")
	}
}

// A Close that fails writing the .bin (a full disk: here its file is
// closed under it) removes the temporary .bin too, not only the .idx.
func TestMegatronWriterCloseFailureLeavesNoTemporaryFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := NewMegatronWriter(filepath.Join(dir, "c"), collate.Uint16)
	require.NoError(t, err)
	require.NoError(t, w.Add([]int64{1, 2, 3}))
	require.NoError(t, w.bin.Close()) // the buffered tokens cannot be written
	require.Error(t, w.Close())
	assert.Empty(t, dirNames(t, dir))
}
