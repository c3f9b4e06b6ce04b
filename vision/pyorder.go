package vision

import (
	"cmp"
	"unicode/utf8"
)

// pyCompare compares two file names as Python compares them after
// os.fsdecode: code point by code point, with each byte that is not part
// of well-formed UTF-8 read as the lone surrogate U+DC00+byte (the
// surrogateescape handler). It is how torchvision's sorted() orders class
// folders and files. Byte order agrees for well-formed UTF-8 but not for
// an undecodable byte, which Python puts between U+D7FF and U+E000.
// Python's decoder and utf8.DecodeRuneInString reject the same sequences
// (surrogates, overlongs, beyond U+10FFFF, cut short), and both escape
// them a byte at a time.
func pyCompare(a, b string) int {
	// Skip the common prefix up to its last ASCII byte: an ASCII byte is
	// a whole rune in either reading, so both names decode alike so far.
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	for i > 0 && a[i-1] >= utf8.RuneSelf {
		i--
	}
	a, b = a[i:], b[i:]
	for a != "" && b != "" {
		ra, na := pyRune(a)
		rb, nb := pyRune(b)
		if ra != rb {
			return cmp.Compare(ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

// pyRune is the first code point of s as os.fsdecode reads it, and its
// length in bytes.
func pyRune(s string) (rune, int) {
	if s[0] < utf8.RuneSelf {
		return rune(s[0]), 1
	}
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && n == 1 {
		return 0xdc00 + rune(s[0]), 1
	}
	return r, n
}
