package regfile

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// endless is a file that grows as fast as it is read: it never ends.
func endless(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// A file that grows while it is read: one whose fstat said n bytes
// gives those n; one whose fstat said 0 (a file of /proc) is read to its
// end within the bound, refused past it, never reading more than the
// bound and one byte.
func TestFileThatGrows(t *testing.T) {
	t.Parallel()
	buf, n, err := fill("grows", nil, false, 10, 100, endless)
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	assert.Len(t, buf, 10, "no more than fstat said is allocated")

	read := 0
	counting := func(p []byte) (int, error) { k, err := endless(p); read += k; return k, err }
	_, _, err = fill("grows", nil, false, 0, 10000, counting)
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.ErrorContains(t, err, "grows")
	assert.ErrorContains(t, err, "the limit is 10000")
	assert.Equal(t, 10001, read, "read up to the bound and one byte")

	var rest []byte
	for range 3 * unknownSize {
		rest = append(rest, 'y')
	}
	r := func(p []byte) (int, error) {
		if len(rest) == 0 {
			return 0, io.EOF
		}
		k := copy(p, rest)
		rest = rest[k:]
		return k, nil
	}
	buf, n, err = fill("proc", nil, true, 0, 0, r)
	require.NoError(t, err)
	assert.Equal(t, 3*unknownSize, n, "to its end with no bound")
	assert.Equal(t, byte('y'), buf[n-1])
}

// A file that ends sooner than fstat said gives what it has.
func TestFileThatShrinks(t *testing.T) {
	t.Parallel()
	data := []byte("abc")
	r := func(p []byte) (int, error) {
		k := copy(p, data)
		data = data[k:]
		return k, nil
	}
	buf, n, err := fill("shrinks", nil, false, 10, 0, r)
	require.NoError(t, err)
	assert.Equal(t, "abc", string(buf[:n]))
}
