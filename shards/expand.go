package shards

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Limits of one pattern: the names it may stand for, and their bytes in
// all. Both are checked on the parsed pattern, before a name is made.
const (
	maxExpand      = 1 << 22
	maxExpandBytes = 1 << 28
)

// Expand returns the names a brace pattern stands for, in order, as the
// shell (and WebDataset's braceexpand) expands them:
//
//	train-{0000..0003}.tar    train-0000.tar ... train-0003.tar (zero-padded to the wider bound)
//	{train,val}-{0..1}.tar    train-0.tar train-1.tar val-0.tar val-1.tar (leftmost group varies slowest)
//	{a,b{1..2}}.tar           a.tar b1.tar b2.tar (groups nest)
//	part-{0..10..5}-{a..c}    part-0-a ... part-10-c (a step; letters)
//
// A range counts down when its first bound is the larger. A pattern
// without braces is itself. Unbalanced braces, and a group that is neither
// a range nor a list of two or more alternatives ("{x}", "{}"), are errors
// naming the byte offset. A pattern of more than 4 Mi names, or 256 MiB
// of names, is an error before any name is made.
func Expand(pattern string) ([]string, error) {
	p, err := parsePattern(pattern, 0)
	if err == nil {
		err = p.check()
	}
	if err != nil {
		return nil, fmt.Errorf("shards: pattern %q: %w", pattern, err)
	}
	return p.names(), nil
}

// braces is a parsed pattern: its parts, one after the other.
type braces []bracePart

// bracePart is a literal, a list group (alts) or a range group (r).
type bracePart struct {
	lit  string
	alts []braces
	r    *span
}

// parsePattern parses s, which starts at byte base of the whole pattern.
func parsePattern(s string, base int) (braces, error) {
	var out braces
	for {
		open := strings.IndexAny(s, "{}")
		if open < 0 {
			if s != "" {
				out = append(out, bracePart{lit: s})
			}
			return out, nil
		}
		if s[open] == '}' {
			return nil, fmt.Errorf("unmatched } at byte %d", base+open)
		}
		if open > 0 {
			out = append(out, bracePart{lit: s[:open]})
		}
		end, commas := -1, []int(nil)
		depth := 0
		for i := open; i < len(s) && end < 0; i++ {
			switch s[i] {
			case '{':
				depth++
			case '}':
				if depth--; depth == 0 {
					end = i
				}
			case ',':
				if depth == 1 {
					commas = append(commas, i)
				}
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("unmatched { at byte %d", base+open)
		}
		if len(commas) == 0 {
			r, ok, err := parseRange(s[open+1 : end])
			if err != nil {
				return nil, fmt.Errorf("group at byte %d: %w", base+open, err)
			}
			if !ok {
				return nil, fmt.Errorf("group %q at byte %d is neither a range {a..b} nor a list {a,b}", s[open:end+1], base+open)
			}
			out = append(out, bracePart{r: r})
		} else {
			var alts []braces
			start := open + 1
			for _, c := range append(commas, end) {
				sub, err := parsePattern(s[start:c], base+start)
				if err != nil {
					return nil, err
				}
				alts = append(alts, sub)
				start = c + 1
			}
			out = append(out, bracePart{alts: alts})
		}
		s, base = s[end+1:], base+end+1
	}
}

// check returns an error when p stands for more than maxExpand names or
// maxExpandBytes bytes. It counts first, which costs no more than the
// pattern's length, and sums the names' lengths only then: every range
// is at most as long as the count, so that costs at most the count.
func (p braces) check() error {
	if p.count() > maxExpand {
		return fmt.Errorf("more than %d names", maxExpand)
	}
	if _, b := p.size(); b > maxExpandBytes {
		return fmt.Errorf("more than %d bytes of names", maxExpandBytes)
	}
	return nil
}

// Saturating arithmetic on counts and sizes: beyond satLimit, one is
// satLimit+1.
const satLimit = 1 << 62

func satAdd(a, b int64) int64 { return min(a+b, satLimit+1) } // a, b <= satLimit+1: no overflow
func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > (satLimit+1)/b {
		return satLimit + 1
	}
	return min(a*b, satLimit+1)
}

// count returns the names p stands for, saturated.
func (p braces) count() int64 {
	n := int64(1)
	for _, q := range p {
		n = satMul(n, q.count())
	}
	return n
}

func (q bracePart) count() int64 {
	switch {
	case q.r != nil:
		return q.r.n
	case q.alts != nil:
		n := int64(0)
		for _, a := range q.alts {
			n = satAdd(n, a.count())
		}
		return n
	}
	return 1
}

// size returns the names p stands for and their bytes in all, saturated.
// Call it only once count is known to be small.
func (p braces) size() (n, bytes int64) {
	n = 1
	for _, q := range p {
		c, b := q.size()
		// The names so far, each followed by each of q's: n*c names,
		// bytes*c + b*n bytes.
		n, bytes = satMul(n, c), satAdd(satMul(bytes, c), satMul(b, n))
	}
	return n, bytes
}

func (q bracePart) size() (n, bytes int64) {
	switch {
	case q.r != nil:
		for i := range q.r.n {
			bytes += q.r.len(i)
		}
		return q.r.n, bytes
	case q.alts != nil:
		for _, a := range q.alts {
			c, b := a.size()
			n, bytes = satAdd(n, c), satAdd(bytes, b)
		}
		return n, bytes
	}
	return 1, int64(len(q.lit))
}

// names returns the names p stands for, leftmost part varying slowest.
func (p braces) names() []string {
	out := []string{""}
	for _, q := range p {
		vals := q.names()
		next := make([]string, 0, len(out)*len(vals))
		for _, o := range out {
			for _, v := range vals {
				next = append(next, o+v)
			}
		}
		out = next
	}
	return out
}

func (q bracePart) names() []string {
	switch {
	case q.r != nil:
		out := make([]string, q.r.n)
		for i := range out {
			out[i] = q.r.at(int64(i))
		}
		return out
	case q.alts != nil:
		var out []string
		for _, a := range q.alts {
			out = append(out, a.names()...)
		}
		return out
	}
	return []string{q.lit}
}

// span is a range group: n values from a, step apart, as digits padded
// to width (0: none) or as letters.
type span struct {
	a, step, n int64
	width      int
	letters    bool
}

// len returns len(r.at(i)), without making the string.
func (r *span) len(i int64) int64 {
	v := r.a + i*r.step
	if r.letters {
		return 1
	}
	u, neg := uint64(v), int64(0)
	if v < 0 {
		u, neg = -u, 1 // -MinInt64 too
	}
	digits := int64(1)
	for ; u >= 10; u /= 10 {
		digits++
	}
	return max(digits, int64(r.width)-neg) + neg
}

// at returns the range's value i.
func (r *span) at(i int64) string {
	v := r.a + i*r.step
	if r.letters {
		return string(rune(v))
	}
	s := strconv.FormatInt(v, 10)
	if r.width > 0 {
		neg := v < 0
		if neg {
			s = s[1:]
		}
		w := r.width
		if neg {
			w-- // the sign takes one place of the width, as in bash
		}
		if len(s) < w {
			s = strings.Repeat("0", w-len(s)) + s
		}
		if neg {
			s = "-" + s
		}
	}
	return s
}

// parseRange parses the inside of a group "a..b" or "a..b..step",
// whose bounds are both integers or both single letters; ok is false when
// g is not of that form. The step's sign is ignored and 0 means 1, as
// braceexpand and bash have it: the bounds give the direction.
func parseRange(g string) (r *span, ok bool, err error) {
	parts := strings.Split(g, "..")
	if len(parts) != 2 && len(parts) != 3 {
		return nil, false, nil
	}
	lo, hi := parts[0], parts[1]
	step := 1
	if len(parts) == 3 {
		if !isInt(parts[2]) {
			return nil, false, nil
		}
		if step, err = strconv.Atoi(parts[2]); err != nil {
			return nil, true, fmt.Errorf("range %q: step %w", g, err)
		}
		step = max(step, -step, 1)
	}
	var a, b int
	switch {
	case len(lo) == 1 && len(hi) == 1 && isLetter(lo[0]) && isLetter(hi[0]):
		a, b = int(lo[0]), int(hi[0])
	case isInt(lo) && isInt(hi):
		a, err = strconv.Atoi(lo)
		if err == nil {
			b, err = strconv.Atoi(hi)
		}
		if d := b - a; err == nil && (d >= 0) != (b >= a) {
			err = errors.New("bounds too far apart")
		}
		if err != nil {
			return nil, true, fmt.Errorf("range %q: %w", g, err)
		}
	default:
		return nil, false, nil
	}
	r = &span{a: int64(a), letters: !isInt(lo)}
	if !r.letters && (padded(lo) || padded(hi)) {
		r.width = max(len(lo), len(hi))
	}
	n := b - a
	if n < 0 {
		n, step = -n, -step
	}
	n /= max(step, -step)
	if n >= maxExpand {
		return nil, true, fmt.Errorf("range %q has more than %d names", g, maxExpand)
	}
	r.n, r.step = int64(n)+1, int64(step)
	return r, true, nil
}

// isInt reports whether s is a decimal integer as braceexpand reads one:
// digits, after an optional minus sign.
func isInt(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// padded reports whether a bound has a leading zero ("007", "-07").
func padded(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return len(s) > 1 && s[0] == '0'
}
