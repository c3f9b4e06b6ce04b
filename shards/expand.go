package shards

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxExpand bounds the names one pattern may stand for.
const maxExpand = 1 << 22

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
// naming the byte offset.
func Expand(pattern string) ([]string, error) {
	out, err := expand(pattern, 0)
	if err != nil {
		return nil, fmt.Errorf("shards: pattern %q: %w", pattern, err)
	}
	return out, nil
}

// expand expands s, which starts at byte base of the whole pattern.
func expand(s string, base int) ([]string, error) {
	open := strings.IndexAny(s, "{}")
	if open < 0 {
		return []string{s}, nil
	}
	if s[open] == '}' {
		return nil, fmt.Errorf("unmatched } at byte %d", base+open)
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
	var alts []string
	if len(commas) == 0 {
		r, ok, err := expandRange(s[open+1 : end])
		if err != nil {
			return nil, fmt.Errorf("group at byte %d: %w", base+open, err)
		}
		if !ok {
			return nil, fmt.Errorf("group %q at byte %d is neither a range {a..b} nor a list {a,b}", s[open:end+1], base+open)
		}
		alts = r
	} else {
		start := open + 1
		for _, c := range append(commas, end) {
			sub, err := expand(s[start:c], base+start)
			if err != nil {
				return nil, err
			}
			alts = append(alts, sub...)
			start = c + 1
		}
	}
	rest, err := expand(s[end+1:], base+end+1)
	if err != nil {
		return nil, err
	}
	if len(alts)*len(rest) > maxExpand {
		return nil, fmt.Errorf("more than %d names", maxExpand)
	}
	out := make([]string, 0, len(alts)*len(rest))
	for _, a := range alts {
		for _, r := range rest {
			out = append(out, s[:open]+a+r)
		}
	}
	return out, nil
}

// expandRange expands the inside of a group "a..b" or "a..b..step",
// whose bounds are both integers or both single letters; ok is false when
// g is not of that form. The step's sign is ignored and 0 means 1, as
// braceexpand and bash have it: the bounds give the direction.
func expandRange(g string) (out []string, ok bool, err error) {
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
	letters := !isInt(lo)
	width := 0
	if !letters && (padded(lo) || padded(hi)) {
		width = max(len(lo), len(hi))
	}
	n := b - a
	if n < 0 {
		n, step = -n, -step
	}
	n /= max(step, -step)
	if n >= maxExpand {
		return nil, true, fmt.Errorf("range %q has more than %d names", g, maxExpand)
	}
	out = make([]string, 0, n+1)
	for i, v := 0, a; i <= n; i, v = i+1, v+step {
		if letters {
			out = append(out, string(rune(v)))
			continue
		}
		s := strconv.Itoa(v)
		if width > 0 {
			neg := v < 0
			if neg {
				s = s[1:]
			}
			w := width
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
		out = append(out, s)
	}
	return out, true, nil
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
