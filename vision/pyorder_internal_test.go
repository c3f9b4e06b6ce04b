package vision

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Names compare as Python compares os.fsdecode'd names: by code point,
// an undecodable byte b as U+DC00+b.
func TestPyCompare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"a", "b", -1},
		{"B", "a", -1},
		{"ab", "abc", -1},
		{"x\xff", "x\xff", 0},
		{"a", "\u00e9", -1},
		{"\uffff", "\U00010000", -1},             // BMP before astral, as in byte order
		{"\x80", "\U00010000", -1},               // U+DC80 before U+10000
		{"\xff", "\ue000", -1},                   // U+DCFF before U+E000; bytes say after
		{"\ud7ff", "\x80", -1},                   // U+D7FF before U+DC80; bytes say after
		{"\u00e9", "\xc3", -1},                   // U+E9 before U+DCC3; bytes say after (a prefix)
		{"\xef\xbf\xbd", "\xff", 1},              // a real U+FFFD after U+DCFF; bytes say before
		{"\xed\xa0\x80", "\ud7ff", 1},            // an encoded surrogate is three escaped bytes: U+DCED
		{"\xed\xa0\x80", "\xed\x9f", 1},          // U+DCA0 after U+DC9F
		{"\xc0\xaf", "\u00ff", 1},                // an overlong '/' is two escapes: U+DCC0
		{"\xf4\x90\x80\x80", "\U0010ffff", -1},   // beyond U+10FFFF: U+DCF4 before it
		{"\xf0\x90\x80", "\xf0\x90\x80\x80", -1}, // cut short: U+DCF0 before U+10000
		{"z\xffa", "z\ue000", -1},
		{"same\u00e9\xff", "same\u00e9\ue000", -1}, // after a common non-ASCII prefix
	} {
		assert.Equal(t, tc.want, pyCompare(tc.a, tc.b), "%q vs %q", tc.a, tc.b)
		assert.Equal(t, -tc.want, pyCompare(tc.b, tc.a), "%q vs %q", tc.b, tc.a)
	}
}

// pyCompare is a total order that agrees with byte order on valid UTF-8.
func TestPyCompareOrder(t *testing.T) {
	t.Parallel()
	names := []string{"", "a", "\xff", "\x80\x80", "\ue000", "\ud7ff", "\xc3", "\u00e9", "\U00010000", "\uffff",
		"\xed\xa0\x80", "\xef\xbf\xbd", "\xc0\xaf", "a\xff", "a\u00e9", "\xf0\x90\x80", "~"}
	s := slices.Clone(names)
	slices.SortFunc(s, pyCompare)
	for i := 1; i < len(s); i++ {
		assert.Negative(t, pyCompare(s[i-1], s[i]), "%q, %q", s[i-1], s[i])
	}
	valid := []string{"a", "\u00e9", "\ue000", "\ud7ff", "\uffff", "\U00010000", "~", "A\U0010ffff", "A\u07ff"}
	for _, a := range valid {
		for _, b := range valid {
			assert.Equal(t, strings.Compare(a, b), pyCompare(a, b), "%q vs %q", a, b)
		}
	}
}
