package shards

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExpand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"plain.tar", []string{"plain.tar"}},
		{"train-{0000..0003}.tar", []string{"train-0000.tar", "train-0001.tar", "train-0002.tar", "train-0003.tar"}},
		{"t-{8..11}", []string{"t-8", "t-9", "t-10", "t-11"}},
		{"t-{08..11}", []string{"t-08", "t-09", "t-10", "t-11"}},
		{"t-{3..1}", []string{"t-3", "t-2", "t-1"}},
		{"t-{-1..1}", []string{"t--1", "t-0", "t-1"}},
		{"{-05..05}", []string{"-05", "-04", "-03", "-02", "-01", "000", "001", "002", "003", "004", "005"}},
		{"{a,b}-{0..1}.tar", []string{"a-0.tar", "a-1.tar", "b-0.tar", "b-1.tar"}},
		{"s3://b/{train,val{1..2}}.tar", []string{"s3://b/train.tar", "s3://b/val1.tar", "s3://b/val2.tar"}},
		{"{a,,b}", []string{"a", "", "b"}},
		{"x{0..0}y", []string{"x0y"}},
		// Steps and letters, as braceexpand and bash expand them: the
		// step's sign is ignored, 0 means 1, the bounds give the direction.
		{"p-{0..10..5}", []string{"p-0", "p-5", "p-10"}},
		{"p-{00..10..5}", []string{"p-00", "p-05", "p-10"}},
		{"{10..1..-4}", []string{"10", "6", "2"}},
		{"{1..3..0}", []string{"1", "2", "3"}},
		{"{-3..3..3}", []string{"-3", "0", "3"}},
		{"{a..c}.tar", []string{"a.tar", "b.tar", "c.tar"}},
		{"{e..a..2}", []string{"e", "c", "a"}},
		{"{Y..b}", []string{"Y", "Z", "[", "\\", "]", "^", "_", "`", "a", "b"}},
	} {
		got, err := Expand(tc.pattern)
		require.NoError(t, err, tc.pattern)
		assert.Equal(t, tc.want, got, tc.pattern)
	}
}

func TestExpandErrors(t *testing.T) {
	t.Parallel()
	for pattern, want := range map[string]string{
		"a{0..3":        `pattern "a{0..3": unmatched { at byte 1`,
		"a}":            `pattern "a}": unmatched } at byte 1`,
		"a{x}b":         `group "{x}" at byte 1 is neither a range {a..b} nor a list {a,b}`,
		"{}":            `group "{}" at byte 0 is neither`,
		"{a,{b}":        "unmatched { at byte 0",
		"{a,b}{c,{d}}":  `group "{d}" at byte 8`,
		"{0..99999999}": "more than",
		"{0..2..x}":     `group "{0..2..x}" at byte 0 is neither`,
		"{a..2}":        `group "{a..2}" at byte 0 is neither`,
		"{ab..c}":       `group "{ab..c}" at byte 0 is neither`,
		"{1..2..3..4}":  `group "{1..2..3..4}" at byte 0 is neither`,
		// Bounds and steps are -?digits, as braceexpand's: no sign +, no spaces.
		"{+1..3}":    `group "{+1..3}" at byte 0 is neither`,
		"{1.. 3}":    `group "{1.. 3}" at byte 0 is neither`,
		"{1..3..+1}": `group "{1..3..+1}" at byte 0 is neither`,
		"{-9223372036854775808..9223372036854775807}": "bounds too far apart",
		"{0..99999999999999999999}":                   "value out of range",
	} {
		_, err := Expand(pattern)
		require.Error(t, err, pattern)
		assert.Contains(t, err.Error(), want, pattern)
	}
}

func TestExpandRangeLen(t *testing.T) {
	t.Parallel()
	for _, g := range []string{"-105..105", "-05..05", "0000..0012", "9..11", "a..e", "-9223372036854775808..-9223372036854775800", "9223372036854775800..9223372036854775807"} {
		r, ok, err := parseRange(g)
		require.NoError(t, err, g)
		require.True(t, ok, g)
		for i := range r.n {
			assert.Equal(t, int64(len(r.at(i))), r.len(i), "%s: value %d", g, i)
		}
	}
}
