package main

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"github.com/sugarme/tokenizer/model/bpe"
	"github.com/sugarme/tokenizer/pretrained"
	"github.com/tiktoken-go/tokenizer"
	"golang.org/x/text/unicode/norm"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// textTokenizer turns text into token ids and back. It is safe for
// concurrent use.
type textTokenizer interface {
	// Name is the tokenizer as --tokenizer named it.
	Name() string
	// Encode appends the ids of text to dst.
	Encode(dst []int64, text string) ([]int64, error)
	// Decode returns the text of ids; bytes that are not UTF-8 (a
	// character cut by the end of ids) become U+FFFD.
	Decode(ids []int64) (string, error)
	// VocabSize is one more than the largest id.
	VocabSize() int
	// EOD is the end-of-document token (--append-eod) and its text; ok
	// is false where the tokenizer names none.
	EOD() (id int64, text string, ok bool)
}

// tiktokenEncodings are the embedded tiktoken encodings: their ranks
// (tiktoken-go's), split pattern (tiktoken's), vocabulary size (n_vocab,
// special tokens included), end-of-text token and special tokens (as
// tiktoken_ext/openai_public.py has them; ids between them, such as
// cl100k_base's 100256 and 100261-100275, are no token).
var tiktokenEncodings = map[string]struct {
	enc      tokenizer.Encoding
	pattern  string
	vocab    int
	eod      int64
	specials map[int64]string
}{
	"r50k_base":   {tokenizer.R50kBase, gpt2Pattern, 50257, 50256, map[int64]string{50256: "<|endoftext|>"}},
	"p50k_base":   {tokenizer.P50kBase, gpt2Pattern, 50281, 50256, map[int64]string{50256: "<|endoftext|>"}},
	"cl100k_base": {tokenizer.Cl100kBase, cl100kPattern, 100277, 100257, map[int64]string{100257: "<|endoftext|>", 100258: "<|fim_prefix|>", 100259: "<|fim_middle|>", 100260: "<|fim_suffix|>", 100276: "<|endofprompt|>"}},
	"o200k_base":  {tokenizer.O200kBase, o200kPattern, 200019, 199999, map[int64]string{199999: "<|endoftext|>", 200018: "<|endofprompt|>"}},
}

// The split patterns of tiktoken's encodings (r50k_base and p50k_base
// have GPT-2's, gpt2Pattern).
const (
	cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	o200kPattern  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// tiktokenNames are the names --tokenizer takes for them.
func tiktokenNames() []string {
	var names []string
	for n := range tiktokenEncodings {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// newTokenizer returns the tokenizer that --tokenizer names: a tiktoken
// encoding, or the path of a tokenizer.json.
func newTokenizer(name string) (textTokenizer, error) {
	if _, ok := tiktokenEncodings[name]; ok {
		return newTiktoken(name)
	}
	if !strings.Contains(name, "/") && !strings.HasSuffix(name, ".json") {
		return nil, usagef("--tokenizer %q: want one of %s, or the path of a tokenizer.json", name, strings.Join(tiktokenNames(), ", "))
	}
	return loadHFTokenizer(name)
}

// compilePattern compiles a split pattern for regexp2's interpreter.
// regexp2.MustCompile is not used on purpose: for a pattern that a
// linked package registered generated code for, it runs that code, and
// tiktoken-go v0.10.0 registers code for its patterns that splits
// "\n  \n" as "\n", "  \n" where tiktoken (and the interpreter) keep one
// piece: cl100k_base then gives 2 tokens where tiktoken gives 1.
func compilePattern(expr string) (*regexp2.Regexp, error) {
	return regexp2.Compile(expr, regexp2.None)
}

// tiktokenTokenizer is a tiktoken encoding, encoded as tiktoken's
// encode_ordinary does: a special token's text in a document
// ("<|endoftext|>") is text, not the special token. The ranks are
// tiktoken-go's, embedded in the binary; the split and the merges are
// this file's (see compilePattern), the merges as tiktoken's
// byte_pair_merge: the adjacent pair whose bytes have the lowest rank
// first.
type tiktokenTokenizer struct {
	name     string
	re       *regexp2.Regexp
	ranks    map[string]int
	tokens   []string // by id; "" where no token
	specials map[int64]string
	vocab    int
	eod      int64
}

// newTiktoken returns the tiktoken encoding of that name.
func newTiktoken(name string) (*tiktokenTokenizer, error) {
	e := tiktokenEncodings[name]
	codec, err := tokenizer.Get(e.enc)
	if err != nil {
		return nil, err
	}
	re, err := compilePattern(e.pattern)
	if err != nil {
		return nil, err
	}
	t := &tiktokenTokenizer{name: name, re: re, ranks: make(map[string]int, e.vocab), tokens: make([]string, e.vocab), vocab: e.vocab, eod: e.eod, specials: e.specials}
	for id := range e.vocab {
		if s, err := codec.Decode([]uint{uint(id)}); err == nil && s != "" {
			t.ranks[s], t.tokens[id] = id, s
		}
	}
	return t, nil
}

func (t *tiktokenTokenizer) Name() string   { return t.name }
func (t *tiktokenTokenizer) VocabSize() int { return t.vocab }
func (t *tiktokenTokenizer) EOD() (int64, string, bool) {
	return t.eod, "<|endoftext|>", true
}

func (t *tiktokenTokenizer) Encode(dst []int64, text string) ([]int64, error) {
	pieces, err := splitPieces(t.re, text, nil)
	if err != nil {
		return dst, err
	}
	var m merger
	for _, p := range pieces {
		if id, ok := t.ranks[p]; ok {
			dst = append(dst, int64(id))
			continue
		}
		// Part i starts at byte i of the piece; parts i and j, which ends
		// where k starts, merge where their bytes are a token.
		next := m.merge(len(p), func(i, _, k int) int {
			if r, ok := t.ranks[p[i:k]]; ok {
				return r
			}
			return noMerge
		}, func(int, int) {})
		for i := 0; i < len(p); i = next[i] {
			dst = append(dst, int64(t.ranks[p[i:next[i]]]))
		}
	}
	return dst, nil
}

func (t *tiktokenTokenizer) Decode(ids []int64) (string, error) {
	var b strings.Builder
	for _, id := range ids {
		special, isSpecial := t.specials[id]
		switch {
		case isSpecial:
			b.WriteString(special)
		case id < 0 || id >= int64(len(t.tokens)) || t.tokens[id] == "":
			return "", fmt.Errorf("token %d is not in %s", id, t.name)
		default:
			b.WriteString(t.tokens[id])
		}
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD"), nil
}

// splitPieces appends to dst the pieces of text that re splits it into:
// each match, and each stretch between matches (Hugging Face's Split
// with behavior Isolated; tiktoken's pattern matches every character).
func splitPieces(re *regexp2.Regexp, text string, dst []string) ([]string, error) {
	m, err := re.FindAllStringIndex(text, -1)
	if err != nil {
		return dst, err
	}
	at := 0
	for _, ix := range m {
		if ix[0] > at {
			dst = append(dst, text[at:ix[0]])
		}
		if ix[1] > ix[0] {
			dst = append(dst, text[ix[0]:ix[1]])
		}
		at = ix[1]
	}
	if at < len(text) {
		dst = append(dst, text[at:])
	}
	return dst, nil
}

// noMerge is the rank of a pair that does not merge.
const noMerge = math.MaxInt

// heapMerges is the length of a piece, in bytes, from which its merges
// are found with a heap (n log n) rather than a scan (n²).
const heapMerges = 64

// merger runs byte-pair merges; its memory is reused from piece to
// piece. The zero value is ready to use.
type merger struct {
	next, prev, rank []int
	q                mergeQueue
}

// merge merges the n parts of a piece (part i starts as its byte i): the
// adjacent pair of the lowest rank first, the leftmost of equal ranks
// first, until no pair merges, as tiktoken and Hugging Face's BPE do.
// rank(i, j, k) is the rank of merging part i with the part after it, j,
// which ends where part k starts (k is n at the end), or noMerge;
// merged(i, j) says that j merged into i. It returns next: the parts left
// are 0, next[0], next[next[0]], ... until n.
func (m *merger) merge(n int, rank func(i, j, k int) int, merged func(i, j int)) []int {
	m.next, m.prev, m.rank = resize(m.next, n+1), resize(m.prev, n), resize(m.rank, n)
	next, prev, ranks := m.next, m.prev, m.rank
	for i := range n {
		next[i], prev[i] = i+1, i-1
	}
	next[n] = n
	pairRank := func(i int) int {
		if j := next[i]; j < n {
			return rank(i, j, next[j])
		}
		return noMerge
	}
	join := func(i int) { // part next[i] into part i
		j := next[i]
		merged(i, j)
		next[i] = next[j]
		if next[j] < n {
			prev[next[j]] = i
		}
		ranks[j] = noMerge
		ranks[i] = pairRank(i)
		if p := prev[i]; p >= 0 {
			ranks[p] = pairRank(p)
		}
	}
	for i := range n {
		ranks[i] = pairRank(i)
	}
	if n < heapMerges {
		for {
			best, at := noMerge, -1
			for i := 0; i < n; i = next[i] {
				if ranks[i] < best {
					best, at = ranks[i], i
				}
			}
			if at < 0 {
				return next
			}
			join(at)
		}
	}
	m.q.items = m.q.items[:0]
	for i := range n {
		if ranks[i] != noMerge {
			m.q.items = append(m.q.items, mergeAt{ranks[i], i})
		}
	}
	heap.Init(&m.q)
	for m.q.Len() > 0 {
		top := heap.Pop(&m.q).(mergeAt)
		if ranks[top.pos] != top.rank {
			continue // stale: the pair merged, or changed
		}
		i := top.pos
		join(i)
		for _, k := range [2]int{i, prev[i]} {
			if k >= 0 && ranks[k] != noMerge {
				heap.Push(&m.q, mergeAt{ranks[k], k})
			}
		}
	}
	return next
}

// resize returns s with length n, reallocated where it is too short.
func resize(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	return s[:n]
}

// mergeAt is a pair that merges: its rank, and the position of its left
// part.
type mergeAt struct{ rank, pos int }

// mergeQueue is a heap of pairs, lowest rank first, then leftmost.
type mergeQueue struct{ items []mergeAt }

func (q *mergeQueue) Len() int { return len(q.items) }
func (q *mergeQueue) Less(a, b int) bool {
	x, y := q.items[a], q.items[b]
	return x.rank < y.rank || x.rank == y.rank && x.pos < y.pos
}
func (q *mergeQueue) Swap(a, b int) { q.items[a], q.items[b] = q.items[b], q.items[a] }
func (q *mergeQueue) Push(x any)    { q.items = append(q.items, x.(mergeAt)) }
func (q *mergeQueue) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return x
}

// hfTokenizerDoc says, for --help and the errors, which tokenizer.json
// files are read.
const hfTokenizerDoc = `A tokenizer.json is read where it is a byte-level BPE (the kind of
GPT-2, RoBERTa, GPT-NeoX, Llama 3, Qwen 2 and tiktoken conversions):
model BPE with every byte in its vocabulary, no dropout, no
continuing_subword_prefix or end_of_word_suffix, no byte_fallback; a
normalizer of null or NFC; a pre_tokenizer of ByteLevel, or a Sequence of
Split (Regex or String, behavior Isolated, not inverted) steps then
ByteLevel; added tokens without single_word. Any other kind (WordPiece,
Unigram, Metaspace/SentencePiece, other normalizers) is refused, not
tokenized differently from Hugging Face.`

// hfTokenizer is a byte-level BPE tokenizer.json, encoded as Hugging
// Face's tokenizers library does with add_special_tokens=False: added
// tokens found in the text (special ones included, leftmost longest)
// become their ids, the rest is normalized, pre-tokenized and merged by
// the BPE model. The model's vocabulary and merges are read by
// github.com/sugarme/tokenizer (pretrained.FromReader). The rest is this
// file's, because sugarme gets it wrong: its ByteLevel pre-tokenizer
// drops the \s+(?!\S) rule of GPT-2's pattern (it encodes "a\n\nb" as 3
// tokens where GPT-2 has 4), it drops special tokens found in the text,
// it compiles a Split's pattern with Go's regexp, which has no look-ahead
// (Llama 3's pattern panics), and its merge loop breaks ties between
// equal pairs out of order (five newlines give ĊĊ Ċ ĊĊ where Hugging Face
// and tiktoken give ĊĊ ĊĊ Ċ). The patterns here run on regexp2's
// interpreter (compilePattern); the merges go lowest rank first, the
// leftmost of equal ones first, as Hugging Face's and tiktoken's do.
type hfTokenizer struct {
	path         string
	model        *bpe.BPE
	merges       bpe.Merges
	byteIDs      [256]int       // the id of each byte's token
	vocab        map[string]int // the model's, for ignore_merges
	ignoreMerges bool
	nfc          bool
	steps        []preStep
	added        []addedToken
	byFirst      [256][]int // indices into added whose content starts with that byte, longest first
	idToAdded    map[int]string
	vocabSize    int
	eod          int64
	eodText      string
	hasEOD       bool
}

// preStep is one step of the pre-tokenizer: a Split (re), or ByteLevel
// (byteLevel; re is GPT-2's pattern where use_regex is on).
type preStep struct {
	re          *regexp2.Regexp
	prefixSpace bool
	byteLevel   bool
}

// addedToken is an entry of added_tokens.
type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Special    bool   `json:"special"`
}

// gpt2Pattern is the pattern of the ByteLevel pre-tokenizer with
// use_regex (GPT-2's, and tiktoken's r50k_base).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// hfEODs are the end-of-text tokens looked for, in order, where --eod is
// not given.
var hfEODs = []string{"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"}

// maxTokenizerJSON bounds a tokenizer.json, read whole.
const maxTokenizerJSON = 1 << 30

// loadHFTokenizer reads the tokenizer.json at path, refusing the kinds it
// would not encode as Hugging Face does.
func loadHFTokenizer(path string) (t *hfTokenizer, err error) {
	data, err := regfile.ReadFile(path, maxTokenizerJSON)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		AddedTokens  []addedToken   `json:"added_tokens"`
		Normalizer   map[string]any `json:"normalizer"`
		PreTokenizer map[string]any `json:"pre_tokenizer"`
		Model        struct {
			Type                    string         `json:"type"`
			Dropout                 *float64       `json:"dropout"`
			ContinuingSubwordPrefix *string        `json:"continuing_subword_prefix"`
			EndOfWordSuffix         *string        `json:"end_of_word_suffix"`
			ByteFallback            bool           `json:"byte_fallback"`
			IgnoreMerges            bool           `json:"ignore_merges"`
			Vocab                   map[string]int `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: not a tokenizer.json: %w", path, err)
	}
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s; only byte-level BPE tokenizers are read (see tensorbatch corpus build --help)", path, fmt.Sprintf(format, args...))
	}
	m := cfg.Model
	switch {
	case m.Type != "BPE":
		return nil, refuse("model %q, not BPE", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, refuse("BPE dropout %v: its tokens are random", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, refuse("continuing_subword_prefix %q", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, refuse("end_of_word_suffix %q", *m.EndOfWordSuffix)
	case m.ByteFallback:
		return nil, refuse("byte_fallback (a SentencePiece-style BPE)")
	}
	t = &hfTokenizer{path: path, vocab: m.Vocab, ignoreMerges: m.IgnoreMerges, idToAdded: map[int]string{}}
	for b := range 256 {
		if _, ok := m.Vocab[byteChars[b]]; !ok {
			return nil, refuse("the vocabulary lacks byte %#02x (%q): not a byte-level BPE", b, byteChars[b])
		}
	}
	if err := t.normalizer(cfg.Normalizer); err != nil {
		return nil, refuse("%v", err)
	}
	if err := t.preTokenizer(cfg.PreTokenizer); err != nil {
		return nil, refuse("%v", err)
	}
	for _, a := range cfg.AddedTokens {
		if a.SingleWord {
			return nil, refuse("added token %q is single_word", a.Content)
		}
		if a.Content == "" {
			continue
		}
		t.added = append(t.added, a)
		t.idToAdded[a.ID] = a.Content
		t.vocabSize = max(t.vocabSize, a.ID+1)
	}
	for i, a := range t.added {
		t.byFirst[a.Content[0]] = append(t.byFirst[a.Content[0]], i)
	}
	for _, l := range t.byFirst {
		slices.SortStableFunc(l, func(a, b int) int { return len(t.added[b].Content) - len(t.added[a].Content) })
	}
	for _, id := range m.Vocab {
		t.vocabSize = max(t.vocabSize, id+1)
	}
	for _, name := range hfEODs {
		if !t.hasEOD {
			t.eod, t.eodText, t.hasEOD = t.tokenID(name)
		}
	}

	// The model, through sugarme: the other parts are left out of what it
	// reads (they are this file's), so that none of its panics on them
	// (a pattern Go's regexp cannot compile) is reached.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range []string{"added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder", "truncation", "padding"} {
		delete(raw, k)
	}
	pruned, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("%s: the BPE model: %v", path, r)
		}
	}()
	tk, err := pretrained.FromReader(bytes.NewReader(pruned))
	if err != nil {
		return nil, fmt.Errorf("%s: the BPE model: %w", path, err)
	}
	model, ok := tk.GetModel().(*bpe.BPE)
	if !ok {
		return nil, fmt.Errorf("%s: the model is a %T, not sugarme's BPE", path, tk.GetModel())
	}
	t.model, t.merges = model, *model.Merges
	for b := range 256 {
		t.byteIDs[b] = m.Vocab[byteChars[b]]
	}
	return t, nil
}

// tokenID returns the id of an added token or vocabulary entry of that
// content.
func (t *hfTokenizer) tokenID(content string) (int64, string, bool) {
	for _, a := range t.added {
		if a.Content == content {
			return int64(a.ID), content, true
		}
	}
	if id, ok := t.vocab[content]; ok {
		return int64(id), content, true
	}
	return 0, "", false
}

// normalizer reads the normalizer: null, or NFC.
func (t *hfTokenizer) normalizer(n map[string]any) error {
	if n == nil {
		return nil
	}
	typ, _ := n["type"].(string)
	if typ == "Sequence" { // of none, or of one NFC
		steps, _ := n["normalizers"].([]any)
		switch len(steps) {
		case 0:
			return nil
		case 1:
			one, _ := steps[0].(map[string]any)
			return t.normalizer(one)
		}
		return fmt.Errorf("normalizer Sequence of %d steps, want null or NFC", len(steps))
	}
	if typ != "NFC" {
		return fmt.Errorf("normalizer %q, want null or NFC", typ)
	}
	t.nfc = true
	return nil
}

// preTokenizer reads the pre-tokenizer: ByteLevel, or a Sequence of
// Split steps then ByteLevel.
func (t *hfTokenizer) preTokenizer(p map[string]any) error {
	if p == nil {
		return errors.New("no pre_tokenizer, want ByteLevel")
	}
	steps := []any{p}
	if typ, _ := p["type"].(string); typ == "Sequence" {
		steps, _ = p["pretokenizers"].([]any)
	}
	for i, s := range steps {
		step, _ := s.(map[string]any)
		typ, _ := step["type"].(string)
		switch typ {
		case "ByteLevel":
			if i != len(steps)-1 {
				return fmt.Errorf("pre_tokenizer step %d of %d is ByteLevel, want it last", i+1, len(steps))
			}
			bl := preStep{byteLevel: true}
			bl.prefixSpace, _ = step["add_prefix_space"].(bool)
			if use, ok := step["use_regex"].(bool); !ok || use {
				re, err := compilePattern(gpt2Pattern)
				if err != nil {
					return err
				}
				bl.re = re
			}
			t.steps = append(t.steps, bl)
		case "Split":
			if behavior, _ := step["behavior"].(string); behavior != "Isolated" {
				return fmt.Errorf("pre_tokenizer Split with behavior %q, want Isolated", behavior)
			}
			if invert, _ := step["invert"].(bool); invert {
				return errors.New("pre_tokenizer Split inverted")
			}
			pattern, _ := step["pattern"].(map[string]any)
			var expr string
			if re, ok := pattern["Regex"].(string); ok {
				expr = re
			} else if s, ok := pattern["String"].(string); ok {
				expr = regexp2.Escape(s)
			} else {
				return fmt.Errorf("pre_tokenizer Split pattern %v, want Regex or String", pattern)
			}
			re, err := compilePattern(expr)
			if err != nil {
				return fmt.Errorf("pre_tokenizer Split pattern %q: %w", expr, err)
			}
			t.steps = append(t.steps, preStep{re: re})
		default:
			return fmt.Errorf("pre_tokenizer %q, want ByteLevel or a Sequence of Split steps then ByteLevel", typ)
		}
	}
	if len(t.steps) == 0 || !t.steps[len(t.steps)-1].byteLevel {
		return errors.New("pre_tokenizer without ByteLevel")
	}
	return nil
}

func (t *hfTokenizer) Name() string   { return t.path }
func (t *hfTokenizer) VocabSize() int { return t.vocabSize }
func (t *hfTokenizer) EOD() (int64, string, bool) {
	return t.eod, t.eodText, t.hasEOD
}

// Encode appends the ids of text to dst.
func (t *hfTokenizer) Encode(dst []int64, text string) ([]int64, error) {
	start := 0 // of the text before the next added token
	for i := 0; i < len(text); {
		a, from, to := t.addedAt(text, i, start)
		if a == nil {
			i++
			continue
		}
		var err error
		if dst, err = t.encodeText(dst, text[start:from]); err != nil {
			return dst, err
		}
		dst = append(dst, int64(a.ID))
		i, start = to, to
	}
	return t.encodeText(dst, text[start:])
}

// addedAt returns the longest added token at byte i of text, and the
// bytes it takes: with lstrip, the white space before it (not before
// start); with rstrip, the white space after.
func (t *hfTokenizer) addedAt(text string, i, start int) (*addedToken, int, int) {
	for _, k := range t.byFirst[text[i]] {
		a := &t.added[k]
		if !strings.HasPrefix(text[i:], a.Content) {
			continue
		}
		from, to := i, i+len(a.Content)
		if a.LStrip {
			for from > start {
				r, n := utf8.DecodeLastRuneInString(text[start:from])
				if !unicode.IsSpace(r) {
					break
				}
				from -= n
			}
		}
		if a.RStrip {
			for to < len(text) {
				r, n := utf8.DecodeRuneInString(text[to:])
				if !unicode.IsSpace(r) {
					break
				}
				to += n
			}
		}
		return a, from, to
	}
	return nil, 0, 0
}

// encodeText appends the ids of text that holds no added token.
func (t *hfTokenizer) encodeText(dst []int64, text string) ([]int64, error) {
	if text == "" {
		return dst, nil
	}
	if t.nfc {
		text = norm.NFC.String(text)
	}
	pieces := []string{text}
	var next []string
	for _, s := range t.steps {
		next = next[:0]
		for _, p := range pieces {
			if s.prefixSpace && !strings.HasPrefix(p, " ") {
				p = " " + p
			}
			if s.re == nil {
				next = append(next, p)
				continue
			}
			var err error
			if next, err = splitPieces(s.re, p, next); err != nil {
				return dst, err
			}
		}
		pieces, next = next, pieces
	}
	var b strings.Builder
	var syms []int
	var m merger
	for _, p := range pieces {
		if t.ignoreMerges {
			b.Reset()
			for i := 0; i < len(p); i++ {
				b.WriteString(byteChars[p[i]])
			}
			if id, ok := t.vocab[b.String()]; ok {
				dst = append(dst, int64(id))
				continue
			}
		}
		syms = syms[:0]
		for i := 0; i < len(p); i++ {
			syms = append(syms, t.byteIDs[p[i]])
		}
		next := m.merge(len(syms), func(i, j, _ int) int {
			if v, ok := t.merges[bpe.Pair{C1: syms[i], C2: syms[j]}]; ok {
				return v.Rank
			}
			return noMerge
		}, func(i, j int) {
			syms[i] = t.merges[bpe.Pair{C1: syms[i], C2: syms[j]}].NewId
		})
		for i := 0; i < len(syms); i = next[i] {
			dst = append(dst, int64(syms[i]))
		}
	}
	return dst, nil
}

// Decode returns the text of ids: an added token's content, or the bytes
// of a model token.
func (t *hfTokenizer) Decode(ids []int64) (string, error) {
	var b []byte
	for _, id := range ids {
		if s, ok := t.idToAdded[int(id)]; ok {
			b = append(b, s...)
			continue
		}
		s, ok := t.model.IdToToken(int(id))
		if !ok {
			return "", fmt.Errorf("token %d is not in %s", id, t.path)
		}
		for _, r := range s {
			c, ok := charBytes[r]
			if !ok {
				return "", fmt.Errorf("token %d (%q) of %s is not byte-level", id, s, t.path)
			}
			b = append(b, c)
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), nil
}

// byteChars maps each byte to the character that stands for it in a
// byte-level BPE's vocabulary (GPT-2's bytes_to_unicode), and charBytes
// back.
var byteChars, charBytes = func() ([256]string, map[rune]byte) {
	var bc [256]string
	cb := map[rune]byte{}
	n := 0
	for b := range 256 {
		r := rune(b)
		if !('!' <= b && b <= '~' || 0xA1 <= b && b <= 0xAC || 0xAE <= b && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		bc[b] = string(r)
		cb[r] = byte(b)
	}
	return bc, cb
}()
