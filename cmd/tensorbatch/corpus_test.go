package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tiktoken-go/tokenizer"
)

// corpusMustRun runs args and fails the test unless they exit 0; it returns
// the standard output.
func corpusMustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := tb(t, context.Background(), args...)
	require.Equal(t, 0, code, "tensorbatch %s: %s", strings.Join(args, " "), stderr)
	return stdout
}

// corpusNode runs the ES module script with node in the npm folder, its input
// v as JSON in a file named by its first argument, and decodes its
// output, JSON, into out.
func corpusNode(t *testing.T, script string, v, out any, packages ...string) {
	t.Helper()
	dir := npmDir(t, packages...)
	in := filepath.Join(t.TempDir(), "in.json")
	data, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(in, data, 0o644))
	cmd := exec.Command("node", "--input-type=module", "-e", script, in)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "node: %s", stderr.String())
	require.NoError(t, json.Unmarshal(stdout, out))
}

// corpusJSTiktoken encodes texts with js-tiktoken in each encoding, as
// encode_ordinary does (no special tokens recognized).
const corpusJSTiktoken = `
import { getEncoding } from 'js-tiktoken'
import fs from 'fs'
const { encodings, texts } = JSON.parse(fs.readFileSync(process.argv[1]))
const out = {}
for (const e of encodings) {
  const enc = getEncoding(e)
  out[e] = texts.map(t => enc.encode(t, [], []))
}
console.log(JSON.stringify(out))
`

// corpusJSHFTokenizers encodes texts with @huggingface/tokenizers for each
// tokenizer.json, without the post-processor's special tokens.
const corpusJSHFTokenizers = `
import { Tokenizer } from '@huggingface/tokenizers'
import fs from 'fs'
const { tokenizers, texts } = JSON.parse(fs.readFileSync(process.argv[1]))
const out = {}
for (const [name, path] of Object.entries(tokenizers)) {
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(path)), {})
  out[name] = texts.map(t => Array.from(tok.encode(t, { add_special_tokens: false }).ids))
}
console.log(JSON.stringify(out))
`

// corpusNumpy is a corpus as scripts/megatron_check.py reads it.
type corpusNumpy struct {
	DType     string
	Lengths   []int64
	Documents []int64
	Sequences [][]int64
}

// docs returns each document's tokens, its sequences joined.
func (c corpusNumpy) docs() [][]int64 {
	var out [][]int64
	for d := range len(c.Documents) - 1 {
		doc := []int64{}
		for s := c.Documents[d]; s < c.Documents[d+1]; s++ {
			doc = append(doc, c.Sequences[s]...)
		}
		out = append(out, doc)
	}
	return out
}

// corpusNumpyRead reads the corpus prefix with scripts/megatron_check.py,
// numpy's reader of the format, under Debian's python3: it skips the
// test where numpy is missing, unless $CI is set.
func corpusNumpyRead(t *testing.T, prefix string) corpusNumpy {
	t.Helper()
	const python = "/usr/bin/python3"
	if out, err := exec.Command(python, "-c", "import numpy").CombinedOutput(); err != nil {
		need(t, fmt.Sprintf("%s with numpy: %v: %s", python, err, strings.TrimSpace(string(out))))
	}
	cmd := exec.Command(python, filepath.Join("..", "..", "scripts", "megatron_check.py"), "read", prefix)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "megatron_check.py: %s", stderr.String())
	var c corpusNumpy
	require.NoError(t, json.Unmarshal(out, &c))
	return c
}

// corpusTexts are documents that a tokenizer gets wrong first: unicode
// of many scripts, runs of white space, digits, code, contractions.
var corpusTexts = []string{
	"Hello world",
	"a\n\nb",
	"blank lines with spaces\n  \n\t\n    \n## heading\n \n",
	"  leading and trailing   ",
	"tabs\t\tand\n\n\nnewlines\r\n\r\nCRLF",
	"naïve café, Zürich-Ölstraße; 日本語のテキスト; Ελληνικά; русский текст; עברית; العربية",
	"emoji 🙂👍🏽 family 👨‍👩‍👧 flags 🇫🇷",
	"x = 12345678 + 3.14159; y=0x1F; 1,000,000.00 and 2024-05-06",
	"def f(x):\n    return x**2  # comment\n\n\nclass A:\n\tpass\n",
	"I'm you're we'll they'd it's I'M YOU'RE WE'LL THEY'D",
	"   \n  \t ",
	"<|endoftext|> inside the text",
	"nbsp\u00a0and\u2003em  \u3000ideographic \u00adsoft",
	"for (int i = 0; i < n; ++i) { sum += a[i]; }  // C++\n",
	`{"json": [1, 2, 3], "nested": {"k": null}}`,
	"",
	"URLs https://example.com/path?q=1&r=2#frag and mail a.b@c.org",
	"combining e\u0301 vs é, ﬁ ligature, ＡＢＣ fullwidth",
	"mixed123numbers4567and89letters",
	strings.Repeat("word ", 60),
	strings.Repeat(" ", 20) + "x" + strings.Repeat("\n", 5),
	// pieces long enough for the heap of merges, with ties
	strings.Repeat("\n", 130) + strings.Repeat("abcab", 40) + " " + strings.Repeat("=-", 50) + strings.Repeat("1234567890", 10),
}

// corpusGeneratedTexts returns n documents made of corpusTexts' pieces, joined
// by runs of white space, the same every run.
func corpusGeneratedTexts(n int) []string {
	frags := strings.Fields(strings.Join(corpusTexts, " "))
	seps := []string{" ", "  ", "\n", "\n\n", "\t", "", " \n ", "   "}
	x := uint64(88172645463325252)
	next := func(k int) int {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x % uint64(k))
	}
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range 1 + next(12) {
			b.WriteString(frags[next(len(frags))])
			b.WriteString(seps[next(len(seps))])
		}
		out[i] = b.String()
	}
	return out
}

// corpusWriteJSONL writes texts as JSON lines {"id": i, key: text} to path:
// plain, or compressed with gzip or zstd.
func corpusWriteJSONL(t *testing.T, path, key, compress string, texts []string) {
	t.Helper()
	var buf bytes.Buffer
	for i, text := range texts {
		line, err := json.Marshal(map[string]any{"id": i, key: text})
		require.NoError(t, err)
		buf.Write(line)
		buf.WriteByte('\n')
	}
	data := buf.Bytes()
	var out bytes.Buffer
	switch compress {
	case "gzip":
		z := gzip.NewWriter(&out)
		_, err := z.Write(data)
		require.NoError(t, err)
		require.NoError(t, z.Close())
		data = out.Bytes()
	case "zstd":
		z, err := zstd.NewWriter(&out)
		require.NoError(t, err)
		_, err = z.Write(data)
		require.NoError(t, err)
		require.NoError(t, z.Close())
		data = out.Bytes()
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// corpusWithEOD returns each document's tokens with eod appended to those that
// have a token.
func corpusWithEOD(docs [][]int64, eod int64) [][]int64 {
	out := make([][]int64, len(docs))
	for i, d := range docs {
		out[i] = slices.Clone(d)
		if len(d) > 0 {
			out[i] = append(out[i], eod)
		}
	}
	return out
}

// The tokens of every document, read back by numpy, equal js-tiktoken's
// on the same text, for every embedded encoding; with --split-lines each
// line is a sequence whose tokens are js-tiktoken's of that line; and
// inspect decodes each document back to its text.
func TestCorpusBuildTiktokenMatchesJS(t *testing.T) {
	if testing.Short() {
		t.Skip("the js-tiktoken and numpy peers: slow; go test without -short runs it")
	}
	t.Parallel()
	texts := append(slices.Clone(corpusTexts), corpusGeneratedTexts(200)...)
	var lines []string // every line of every text, for --split-lines
	for _, text := range texts {
		lines = append(lines, strings.SplitAfter(text, "\n")...)
	}
	encodings := tiktokenNames()
	var js map[string][][]int64
	corpusNode(t, corpusJSTiktoken, map[string]any{"encodings": encodings, "texts": append(slices.Clone(texts), lines...)}, &js, "js-tiktoken")

	dir := t.TempDir()
	in := filepath.Join(dir, "docs.jsonl")
	corpusWriteJSONL(t, in, "text", "", texts)
	for _, enc := range encodings {
		t.Run(enc, func(t *testing.T) {
			t.Parallel()
			want := js[enc][:len(texts)]
			eod := tiktokenEncodings[enc].eod
			prefix := filepath.Join(dir, enc)
			var sum buildSummary
			require.NoError(t, json.Unmarshal([]byte(corpusMustRun(t, "corpus", "build", "--tokenizer", enc, "--append-eod", "--out", prefix, "--json", in)), &sum))
			c := corpusNumpyRead(t, prefix)
			wantDType := map[string]string{"r50k_base": "uint16", "p50k_base": "uint16", "cl100k_base": "int32", "o200k_base": "int32"}[enc]
			assert.Equal(t, wantDType, c.DType, "Megatron's choice for the vocabulary")
			assert.Equal(t, wantDType, sum.DType)
			got := c.docs()
			require.Len(t, got, len(texts))
			for i := range texts {
				assert.Equal(t, corpusWithEOD(want, eod)[i], got[i], "document %d: %q", i, texts[i])
			}
			var ntok int64
			for _, d := range got {
				ntok += int64(len(d))
			}
			assert.Equal(t, len(texts), sum.Documents)
			assert.Equal(t, ntok, sum.Tokens)
			require.NotNil(t, sum.EOD)
			assert.Equal(t, eod, *sum.EOD)

			// --split-lines: a sequence a line with a token, the EOD on the last.
			split := prefix + "_lines"
			corpusMustRun(t, "corpus", "build", "--tokenizer", enc, "--split-lines", "--append-eod", "--out", split, in)
			c = corpusNumpyRead(t, split)
			var wantSeqs [][]int64
			var wantDocs []int64
			at := len(texts)
			for _, text := range texts {
				wantDocs = append(wantDocs, int64(len(wantSeqs)))
				for range strings.SplitAfter(text, "\n") {
					if toks := js[enc][at]; len(toks) > 0 {
						wantSeqs = append(wantSeqs, slices.Clone(toks))
					}
					at++
				}
				if int64(len(wantSeqs)) > wantDocs[len(wantDocs)-1] {
					wantSeqs[len(wantSeqs)-1] = append(wantSeqs[len(wantSeqs)-1], eod)
				}
			}
			wantDocs = append(wantDocs, int64(len(wantSeqs)))
			assert.Equal(t, wantDocs, c.Documents)
			require.Len(t, c.Sequences, len(wantSeqs))
			for i := range wantSeqs {
				assert.Equal(t, wantSeqs[i], c.Sequences[i], "sequence %d", i)
			}

			// inspect: the counts, and each document decoded to its text.
			var ins inspectSummary
			require.NoError(t, json.Unmarshal([]byte(corpusMustRun(t, "corpus", "inspect", prefix, "--json")), &ins))
			assert.Equal(t, len(texts), ins.Documents)
			assert.Equal(t, ntok, ins.Tokens)
			assert.Equal(t, wantDType, ins.DType)
			for _, d := range []int{0, 1, 3, 4, 5, 8, 10, 11, 16, 19, 20, 100} {
				var one inspectSummary
				require.NoError(t, json.Unmarshal([]byte(corpusMustRun(t, "corpus", "inspect", prefix+".idx", "--json",
					"--show", fmt.Sprint(d), "--tokens", "0", "--tokenizer", enc)), &one))
				require.NotNil(t, one.Show)
				require.NotNil(t, one.Show.Text)
				wantText := texts[d]
				if texts[d] != "" {
					wantText += "<|endoftext|>"
				}
				assert.Equal(t, wantText, *one.Show.Text, "document %d decoded", d)
				assert.Equal(t, corpusWithEOD(want, eod)[d], one.Show.IDs)
			}
		})
	}
}

// corpusGPT2Vocab returns r50k_base (GPT-2) as a byte-level BPE: each token's
// byte-level string and its id, and the merges reconstructed from the
// ranks, in rank order (each token the merge of the two parts that BPE
// with only the lower ranks leaves of its bytes).
var corpusGPT2Vocab = sync.OnceValues(func() (map[string]int, []string) {
	enc, err := tokenizer.Get(tokenizer.R50kBase)
	if err != nil {
		panic(err)
	}
	const n = 50256
	toks := make([]string, n)
	rank := map[string]int{}
	for id := range n {
		s, err := enc.Decode([]uint{uint(id)})
		if err != nil {
			panic(err)
		}
		toks[id], rank[s] = s, id
	}
	vis := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			b.WriteString(byteChars[s[i]])
		}
		return b.String()
	}
	vocab := map[string]int{}
	var merges []string
	for id, tok := range toks {
		vocab[vis(tok)] = id
		if len(tok) < 2 {
			continue
		}
		parts := make([]string, len(tok))
		for i := range len(tok) {
			parts[i] = tok[i : i+1]
		}
		for len(parts) > 2 {
			best, at := n, -1
			for i := 0; i+1 < len(parts); i++ {
				if r, ok := rank[parts[i]+parts[i+1]]; ok && r < best {
					best, at = r, i
				}
			}
			if at < 0 {
				panic(fmt.Sprintf("token %d (%q): no merge", id, tok))
			}
			parts = slices.Replace(parts, at, at+2, parts[at]+parts[at+1])
		}
		merges = append(merges, vis(parts[0])+" "+vis(parts[1]))
	}
	vocab["<|endoftext|>"] = n
	return vocab, merges
})

// corpusHFTokenizerJSON returns a tokenizer.json of GPT-2's vocabulary with the
// given pre_tokenizer, normalizer and added tokens (beyond
// <|endoftext|>), the model's fields overridden by model.
func corpusHFTokenizerJSON(pre, normalizer any, added []map[string]any, model map[string]any) map[string]any {
	vocab, merges := corpusGPT2Vocab()
	eot := map[string]any{"id": 50256, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": true}
	m := map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "", "end_of_word_suffix": "",
		"fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": merges}
	for k, v := range model {
		m[k] = v
	}
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	return map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens": append([]map[string]any{eot}, added...),
		"normalizer":   normalizer, "pre_tokenizer": pre, "post_processor": bl, "decoder": bl,
		"model": m,
	}
}

// corpusLlama3Pattern is the Split pattern of Llama 3's tokenizer.json (and
// tiktoken's cl100k_base).
const corpusLlama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// corpusWriteJSON writes v as JSON to path.
func corpusWriteJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// Byte-level BPE tokenizer.json files of each kind that build reads
// (GPT-2's ByteLevel pattern; a Split with Llama 3's pattern then
// ByteLevel, with ignore_merges; add_prefix_space, NFC and added tokens
// with lstrip and rstrip) give the tokens that @huggingface/tokenizers
// gives on the same text; the GPT-2 one gives r50k_base's, as
// js-tiktoken has them.
func TestCorpusBuildHFTokenizerMatchesJS(t *testing.T) {
	if testing.Short() {
		t.Skip("the @huggingface/tokenizers peer: slow; go test without -short runs it")
	}
	t.Parallel()
	dir := t.TempDir()
	texts := append(slices.Clone(corpusTexts), corpusGeneratedTexts(150)...)
	texts = append(texts, "<mask> after  <mask>\tand <|im_start|>user\nhi<|im_end|>", "x<|im_start|>y <mask>z",
		" leading space", "e\u0301\u0301 NFC", "<|endoftext|><|endoftext|>")
	byteLevel := func(prefix, regex bool) map[string]any {
		return map[string]any{"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": true, "use_regex": regex}
	}
	kinds := map[string]map[string]any{
		"gpt2": corpusHFTokenizerJSON(byteLevel(false, true), nil, nil, nil),
		"llama3": corpusHFTokenizerJSON(map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": corpusLlama3Pattern}, "behavior": "Isolated", "invert": false},
			byteLevel(false, false),
		}}, nil, []map[string]any{
			{"id": 50257, "content": "<|im_start|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
			{"id": 50258, "content": "<|im_end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
		}, map[string]any{"ignore_merges": true}),
		"prefix-nfc": corpusHFTokenizerJSON(byteLevel(true, true), map[string]any{"type": "NFC"}, []map[string]any{
			{"id": 50257, "content": "<mask>", "single_word": false, "lstrip": true, "rstrip": false, "normalized": false, "special": true},
			{"id": 50258, "content": "<|im_start|>", "single_word": false, "lstrip": false, "rstrip": true, "normalized": false, "special": false},
		}, nil),
	}
	paths := map[string]string{}
	for name, tj := range kinds {
		paths[name] = filepath.Join(dir, name+".json")
		corpusWriteJSON(t, paths[name], tj)
	}
	var js map[string][][]int64
	corpusNode(t, corpusJSHFTokenizers, map[string]any{"tokenizers": paths, "texts": texts}, &js, "@huggingface/tokenizers")
	var tik map[string][][]int64
	corpusNode(t, corpusJSTiktoken, map[string]any{"encodings": []string{"r50k_base"}, "texts": texts}, &tik, "js-tiktoken")

	in := filepath.Join(dir, "docs.jsonl")
	corpusWriteJSONL(t, in, "text", "", texts)
	for name, path := range paths {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			prefix := filepath.Join(dir, name)
			corpusMustRun(t, "corpus", "build", "--tokenizer", path, "--out", prefix, in)
			got := corpusNumpyRead(t, prefix).docs()
			require.Len(t, got, len(texts))
			for i, text := range texts {
				assert.Equal(t, js[name][i], got[i], "document %d: %q", i, text)
				if name == "gpt2" && !strings.Contains(text, "<|") && !strings.Contains(text, "<mask>") {
					assert.Equal(t, tik["r50k_base"][i], got[i], "document %d, r50k_base: %q", i, text)
				}
			}
			// The EOD is <|endoftext|>; inspect decodes the tokens back.
			corpusMustRun(t, "corpus", "build", "--tokenizer", path, "--append-eod", "--out", prefix+"_eod", in)
			got = corpusNumpyRead(t, prefix+"_eod").docs()
			assert.Equal(t, corpusWithEOD(js[name], 50256)[2], got[2])
			var one inspectSummary
			require.NoError(t, json.Unmarshal([]byte(corpusMustRun(t, "corpus", "inspect", prefix+"_eod", "--json",
				"--show", "4", "--tokens", "0", "--tokenizer", path)), &one))
			require.NotNil(t, one.Show.Text)
			want := texts[4] + "<|endoftext|>"
			if name == "prefix-nfc" {
				want = " " + want
			}
			assert.Equal(t, want, *one.Show.Text)
		})
	}
}

// The kinds of tokenizer.json that build does not tokenize as Hugging
// Face does are refused, saying what is not read.
func TestCorpusBuildRefusesOtherTokenizers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "docs.jsonl")
	corpusWriteJSONL(t, in, "text", "", []string{"hello"})
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}
	for name, c := range map[string]struct {
		json any
		want string
	}{
		"wordpiece":       {corpusHFTokenizerJSON(bl, nil, nil, map[string]any{"type": "WordPiece"}), `model "WordPiece", not BPE`},
		"metaspace":       {corpusHFTokenizerJSON(map[string]any{"type": "Metaspace", "replacement": "▁"}, nil, nil, nil), `pre_tokenizer "Metaspace"`},
		"bert-normalizer": {corpusHFTokenizerJSON(bl, map[string]any{"type": "BertNormalizer"}, nil, nil), `normalizer "BertNormalizer"`},
		"byte-fallback":   {corpusHFTokenizerJSON(bl, nil, nil, map[string]any{"byte_fallback": true}), "byte_fallback"},
		"dropout":         {corpusHFTokenizerJSON(bl, nil, nil, map[string]any{"dropout": 0.1}), "dropout"},
		"suffix":          {corpusHFTokenizerJSON(bl, nil, nil, map[string]any{"end_of_word_suffix": "</w>"}), "end_of_word_suffix"},
		"not-byte-level":  {corpusHFTokenizerJSON(bl, nil, nil, map[string]any{"vocab": map[string]int{"a": 0}, "merges": []string{}}), "not a byte-level BPE"},
		"single-word": {corpusHFTokenizerJSON(bl, nil, []map[string]any{{"id": 50257, "content": "<w>", "single_word": true}}, nil),
			`added token "<w>" is single_word`},
		"split-merged": {corpusHFTokenizerJSON(map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\s+`}, "behavior": "MergedWithPrevious", "invert": false}, bl,
		}}, nil, nil, nil), `behavior "MergedWithPrevious"`},
		"no-byte-level": {corpusHFTokenizerJSON(map[string]any{"type": "Whitespace"}, nil, nil, nil), `pre_tokenizer "Whitespace"`},
		"not-json":      {"{", "not a tokenizer.json"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, name+".json")
			if s, ok := c.json.(string); ok {
				require.NoError(t, os.WriteFile(path, []byte(s), 0o644))
			} else {
				corpusWriteJSON(t, path, c.json)
			}
			code, _, stderr := tb(t, context.Background(), "corpus", "build", "--tokenizer", path, "--out", filepath.Join(dir, name), in)
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr, c.want)
			assert.Contains(t, stderr, path)
			assert.NoFileExists(t, filepath.Join(dir, name+".idx"))
		})
	}
}

// The corpus is the same, byte for byte, for any --workers, and from
// gzip and zstd input (known by their magic, whatever their names) as
// from plain; several files make one corpus, in their order.
func TestCorpusBuildDeterministic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	texts := corpusGeneratedTexts(9000) // three chunks of lines
	plain := filepath.Join(dir, "docs.jsonl")
	corpusWriteJSONL(t, plain, "text", "", texts)
	gz, zst := filepath.Join(dir, "docs.jsonl.gz"), filepath.Join(dir, "docs.jsonl.zst")
	corpusWriteJSONL(t, gz, "text", "gzip", texts)
	corpusWriteJSONL(t, zst, "text", "zstd", texts)
	unnamed := filepath.Join(dir, "docs-zstd.jsonl") // zstd, not named so
	corpusWriteJSONL(t, unnamed, "text", "zstd", texts)
	part1, part2 := filepath.Join(dir, "part1.jsonl.gz"), filepath.Join(dir, "part2.jsonl")
	corpusWriteJSONL(t, part1, "text", "gzip", texts[:5000])
	corpusWriteJSONL(t, part2, "text", "", texts[5000:])

	build := func(name string, args ...string) string {
		prefix := filepath.Join(dir, name)
		corpusMustRun(t, append([]string{"corpus", "build", "--tokenizer", "cl100k_base", "--append-eod", "--out", prefix}, args...)...)
		return prefix
	}
	want := build("w1", "--workers", "1", plain)
	for name, args := range map[string][]string{
		"w4":      {"--workers", "4", plain},
		"gzip":    {"--workers", "3", gz},
		"zstd":    {zst},
		"unnamed": {unnamed},
		"parts":   {"--workers", "4", part1, part2},
	} {
		got := build(name, args...)
		for _, ext := range []string{".idx", ".bin"} {
			w, err := os.ReadFile(want + ext)
			require.NoError(t, err)
			g, err := os.ReadFile(got + ext)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(w, g), "%s%s differs from --workers 1 on plain text", name, ext)
		}
	}
	var sum inspectSummary
	require.NoError(t, json.Unmarshal([]byte(corpusMustRun(t, "corpus", "inspect", want, "--json")), &sum))
	assert.Equal(t, len(texts), sum.Documents)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "fake.jsonl.gz"), []byte(`{"text": "not gzip"}`+"\n"), 0o644))
	code, _, stderr := tb(t, context.Background(), "corpus", "build", "--tokenizer", "r50k_base", "--out", filepath.Join(dir, "fake"), filepath.Join(dir, "fake.jsonl.gz"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "fake.jsonl.gz: named .gz, but not gzip")
}

// A build interrupted (its context cancelled, as Ctrl-C does) after
// some of its documents are written leaves no PREFIX.idx or PREFIX.bin,
// no temporary file, and the corpus that was there before.
func TestCorpusBuildInterrupted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "docs.jsonl")
	corpusWriteJSONL(t, in, "text", "", corpusGeneratedTexts(9000))
	prefix := filepath.Join(dir, "c")
	for _, old := range []bool{false, true} {
		if old {
			corpusMustRun(t, "corpus", "build", "--tokenizer", "r50k_base", "--out", prefix, filepath.Join(dir, "docs.jsonl"))
		}
		before := corpusDirNames(t, dir)
		ctx, cancel := context.WithCancel(context.Background())
		chunks := 0
		ctx = context.WithValue(ctx, chunkHookKey{}, func() {
			chunks++
			cancel()
		})
		code, stdout, stderr := tb(t, ctx, "corpus", "build", "--tokenizer", "r50k_base", "--out", prefix, in)
		cancel()
		assert.Equal(t, 1, code)
		assert.Equal(t, 1, chunks, "cancelled after the first chunk")
		assert.Contains(t, stderr, "interrupted")
		assert.Empty(t, stdout)
		assert.Equal(t, before, corpusDirNames(t, dir), "no file left, none removed")
	}
}

// corpusDirNames returns the names in dir, sorted.
func corpusDirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// A bad line is an error naming its file and line, the first in input
// order; with --skip-bad, bad lines are left out, counted and listed.
func TestCorpusBuildBadLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	corpusWriteJSONL(t, good, "text", "", []string{"one", "two"})
	bad := filepath.Join(dir, "bad.jsonl")
	lines := []string{
		`{"text": "fine"}`,
		``,
		`{"text": "also fine"}`,
		`{"text": "cut short`,
		`{"body": "no text key"}`,
		`{"text": 12}`,
		`{"text": ["a", 1]}`,
		`["text"]`,
		`null`,
		`{"text": null}`,
		`{"text": {"nested": "x"}}`,
		`{"text": "last"}`,
	}
	require.NoError(t, os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o644))

	prefix := filepath.Join(dir, "c")
	code, _, stderr := tb(t, context.Background(), "corpus", "build", "--tokenizer", "r50k_base", "--workers", "3", "--out", prefix, good, bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, bad+":4: not JSON")
	assert.Contains(t, stderr, "--skip-bad")
	assert.NoFileExists(t, prefix+".idx")
	assert.NoFileExists(t, prefix+".bin")

	var sum buildSummary
	out := corpusMustRun(t, "corpus", "build", "--tokenizer", "r50k_base", "--skip-bad", "--json", "--out", prefix, good, bad)
	require.NoError(t, json.Unmarshal([]byte(out), &sum))
	assert.Equal(t, int64(8), sum.BadLines)
	assert.Equal(t, []string{
		bad + ":4: not JSON: unexpected end of JSON input",
		bad + `:5: no key "text"`,
		bad + `:6: key "text" is a number, not a string`,
		bad + `:7: key "text" is a list of other than strings`,
		bad + ":8: a JSON array, not an object",
		bad + ":9: a JSON null, not an object",
		bad + `:10: key "text" is null, not a string`,
		bad + `:11: key "text" is an object, not a string`,
	}, sum.Bad)
	assert.Equal(t, 5, sum.Documents, "two good, three fine, the blank line skipped")
	c := corpusNumpyRead(t, prefix)
	assert.Len(t, c.Documents, 6)

	text := corpusMustRun(t, "corpus", "build", "--tokenizer", "r50k_base", "--skip-bad", "--out", prefix, bad)
	assert.Contains(t, text, "skipped    8 bad lines")
	assert.Contains(t, text, bad+":6: key \"text\" is a number")
}

// Usage errors exit 2 and say what is wrong.
func TestCorpusBuildUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "docs.jsonl")
	corpusWriteJSONL(t, in, "text", "", []string{"one"})
	out := filepath.Join(dir, "c")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", out, in}, "--tokenizer is required"},
		{[]string{"--tokenizer", "r50k_base", in}, "--out PREFIX is required"},
		{[]string{"--tokenizer", "gpt5", "--out", out, in}, `--tokenizer "gpt5": want one of cl100k_base, o200k_base, p50k_base, r50k_base`},
		{[]string{"--tokenizer", "cl100k_base", "--dtype", "uint16", "--out", out, in}, "--dtype uint16 holds ids up to 65535, and cl100k_base's reach 100276"},
		{[]string{"--tokenizer", "r50k_base", "--dtype", "float32", "--out", out, in}, `--dtype "float32"`},
		{[]string{"--tokenizer", "r50k_base", "--eod", "50257", "--out", out, in}, "--eod 50257, outside r50k_base's vocabulary of 50257 tokens"},
		{[]string{"--tokenizer", "r50k_base", "--workers", "-1", "--out", out, in}, "--workers -1"},
		{[]string{"--tokenizer", "r50k_base", "--out", out}, "requires at least 1 arg"},
	} {
		code, _, stderr := tb(t, context.Background(), append([]string{"corpus", "build"}, c.args...)...)
		assert.Equal(t, 2, code, "%q: %s", c.args, stderr)
		assert.Contains(t, stderr, c.want, "%q", c.args)
	}
	assert.NoFileExists(t, out+".idx")

	code, _, stderr := tb(t, context.Background(), "corpus", "build", "--tokenizer", "r50k_base", "--out", out, filepath.Join(dir, "missing.jsonl"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "missing.jsonl")
}

// inspect prints a corpus's counts, the distribution of its documents'
// lengths, and a document's first tokens, in text and JSON; --eod and
// --dtype are what the corpus holds.
func TestCorpusInspect(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "docs.jsonl")
	texts := []string{"", "one", "one two three", "a\nb\nc\n", strings.Repeat("word ", 100)}
	corpusWriteJSONL(t, in, "body", "", texts)
	prefix := filepath.Join(dir, "c")
	corpusMustRun(t, "corpus", "build", "--tokenizer", "r50k_base", "--json-key", "body", "--split-lines", "--eod", "7", "--dtype", "int64", "--out", prefix, in)

	enc, err := tokenizer.Get(tokenizer.R50kBase)
	require.NoError(t, err)
	var lengths []int64
	var seqs int
	var total int64
	for _, text := range texts {
		var n int64
		for _, line := range strings.SplitAfter(text, "\n") {
			ids, _, err := enc.Encode(line)
			require.NoError(t, err)
			if len(ids) > 0 {
				seqs++
				n += int64(len(ids))
			}
		}
		if n > 0 {
			n++ // the EOD
		}
		lengths = append(lengths, n)
		total += n
	}

	var sum inspectSummary
	require.NoError(t, json.Unmarshal([]byte(corpusMustRun(t, "corpus", "inspect", prefix, "--json", "--show", "3")), &sum))
	assert.Equal(t, "int64", sum.DType)
	assert.Equal(t, 5, sum.Documents)
	assert.Equal(t, seqs, sum.Sequences)
	assert.Equal(t, total, sum.Tokens)
	sorted := slices.Sorted(slices.Values(lengths))
	assert.Equal(t, lengthSummary{Min: 0, P50: sorted[2], P90: sorted[4], P99: sorted[4], Max: sorted[4], Mean: float64(total) / 5}, sum.Lengths)
	require.NotNil(t, sum.Show)
	assert.Equal(t, 3, sum.Show.Document)
	assert.Equal(t, 3, sum.Show.Sequences)
	assert.Nil(t, sum.Show.Text)
	ids, _, err := enc.Encode(texts[3])
	require.NoError(t, err)
	var want []int64
	for _, id := range ids {
		want = append(want, int64(id))
	}
	assert.Equal(t, append(want, 7), sum.Show.IDs)

	text := corpusMustRun(t, "corpus", "inspect", prefix, "--show", "4", "--tokens", "3", "--tokenizer", "r50k_base")
	assert.Contains(t, text, "documents  5\n")
	assert.Contains(t, text, fmt.Sprintf("tokens     %d\n", total))
	assert.Contains(t, text, fmt.Sprintf("lengths    min 0, p50 %d, p90 %d, p99 %d, max %d", sorted[2], sorted[4], sorted[4], sorted[4]))
	assert.Contains(t, text, "document 4: 102 tokens in 1 sequence; its first 3:\nword word word\n")

	code, _, stderr := tb(t, context.Background(), "corpus", "inspect", prefix, "--show", "5")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--show 5, want a document from 0 to 4")
	code, _, stderr = tb(t, context.Background(), "corpus", "inspect", filepath.Join(dir, "none"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "none.bin")
}

// Every subcommand has an example in its --help.
func TestCorpusHelp(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"build", "inspect"} {
		out := corpusMustRun(t, "corpus", sub, "--help")
		assert.Contains(t, out, "Examples:")
		assert.Contains(t, out, "tensorbatch corpus "+sub)
	}
	out := corpusMustRun(t, "corpus", "build", "--help")
	assert.Contains(t, out, "byte-level BPE")
}

// A zstd file that opens with a skippable frame (pzstd writes one before
// each frame) is zstd, named so or not; a UTF-8 byte order mark before a
// line's JSON (a file saved with one, or such files concatenated) is
// left out: each corpus is the plain file's, byte for byte.
func TestCorpusBuildSkippableFrameAndBOM(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	texts := corpusGeneratedTexts(300)
	plain := filepath.Join(dir, "docs.jsonl")
	corpusWriteJSONL(t, plain, "text", "", texts)
	data, err := os.ReadFile(plain)
	require.NoError(t, err)

	skippable := func(payload string) []byte { // magic 0x184D2A50, size, payload
		return append([]byte{0x50, 0x2a, 0x4d, 0x18, byte(len(payload)), 0, 0, 0}, payload...)
	}
	frame := func(b []byte) []byte {
		var out bytes.Buffer
		z, err := zstd.NewWriter(&out)
		require.NoError(t, err)
		_, err = z.Write(b)
		require.NoError(t, err)
		require.NoError(t, z.Close())
		return out.Bytes()
	}
	half := bytes.IndexByte(data[len(data)/2:], '\n') + len(data)/2 + 1
	pz := append(append(append(skippable("4567"), frame(data[:half])...), skippable("89ab")...), frame(data[half:])...)
	bom := "\xef\xbb\xbf"
	lines := strings.SplitAfter(string(data), "\n")
	lines[0], lines[5] = bom+lines[0], bom+lines[5]
	var gz bytes.Buffer
	z := gzip.NewWriter(&gz)
	_, err = z.Write([]byte(bom + string(data)))
	require.NoError(t, err)
	require.NoError(t, z.Close())
	inputs := map[string][]byte{
		"pzstd.jsonl.zst":  pz,
		"pzstd-unnamed.jl": pz,
		"bom.jsonl":        []byte(strings.Join(lines, "")),
		"bom.jsonl.gz":     gz.Bytes(),
	}
	want := filepath.Join(dir, "want")
	corpusMustRun(t, "corpus", "build", "--tokenizer", "r50k_base", "--out", want, plain)
	for name, b := range inputs {
		in := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(in, b, 0o644))
		got := filepath.Join(dir, "got-"+name)
		corpusMustRun(t, "corpus", "build", "--tokenizer", "r50k_base", "--out", got, in)
		for _, ext := range []string{".idx", ".bin"} {
			w, err := os.ReadFile(want + ext)
			require.NoError(t, err)
			g, err := os.ReadFile(got + ext)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(w, g), "%s%s differs from the plain file's", name, ext)
		}
	}
}

// --eod is a token of the tokenizer: a special token other than
// end-of-text (cl100k_base's <|endofprompt|>) is one, and inspect
// decodes it; an id in the vocabulary's range that no token has (a gap
// between cl100k_base's or o200k_base's special tokens) is refused.
func TestCorpusBuildEODIsAToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "docs.jsonl")
	corpusWriteJSONL(t, in, "text", "", []string{"hello"})
	for _, c := range []struct {
		enc  string
		eod  int64
		text string
	}{
		{"cl100k_base", 100276, "<|endofprompt|>"},
		{"cl100k_base", 100258, "<|fim_prefix|>"},
		{"o200k_base", 200018, "<|endofprompt|>"},
		{"r50k_base", 50256, "<|endoftext|>"},
	} {
		prefix := filepath.Join(dir, fmt.Sprint(c.enc, c.eod))
		corpusMustRun(t, "corpus", "build", "--tokenizer", c.enc, "--eod", fmt.Sprint(c.eod), "--out", prefix, in)
		var one inspectSummary
		require.NoError(t, json.Unmarshal([]byte(corpusMustRun(t, "corpus", "inspect", prefix, "--json", "--show", "0", "--tokenizer", c.enc)), &one))
		require.NotNil(t, one.Show.Text)
		assert.Equal(t, "hello"+c.text, *one.Show.Text)
	}
	for _, c := range []struct {
		enc string
		eod int64
	}{{"cl100k_base", 100256}, {"cl100k_base", 100270}, {"o200k_base", 200005}} {
		prefix := filepath.Join(dir, "gap")
		code, _, stderr := tb(t, context.Background(), "corpus", "build", "--tokenizer", c.enc, "--eod", fmt.Sprint(c.eod), "--out", prefix, in)
		assert.Equal(t, 2, code, "%s --eod %d: %s", c.enc, c.eod, stderr)
		assert.Contains(t, stderr, fmt.Sprintf("--eod %d: no token of %s has that id", c.eod, c.enc))
		assert.NoFileExists(t, prefix+".idx")
	}
}

// --show on a corpus of no documents (an empty input) says so.
func TestCorpusInspectShowEmpty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "empty.jsonl")
	require.NoError(t, os.WriteFile(in, []byte("\n\n"), 0o644))
	prefix := filepath.Join(dir, "c")
	corpusMustRun(t, "corpus", "build", "--tokenizer", "r50k_base", "--out", prefix, in)
	assert.Contains(t, corpusMustRun(t, "corpus", "inspect", prefix), "documents  0\n")
	code, _, stderr := tb(t, context.Background(), "corpus", "inspect", prefix, "--show", "0")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--show 0: the corpus has no documents")
}

// corpusJSTiktokenWhiteSpace is corpusJSTiktoken with tiktoken's white
// space: the patterns' \s and \S as Rust's regex (which tiktoken runs)
// has them, Unicode's White_Space (U+0085 in, U+FEFF out), where
// JavaScript's \s adds U+FEFF and leaves out U+0085.
const corpusJSTiktokenWhiteSpace = `
import { Tiktoken } from 'js-tiktoken/lite'
import fs from 'fs'
const { encodings, texts } = JSON.parse(fs.readFileSync(process.argv[1]))
const W = '\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000'
const out = {}
for (const e of encodings) {
  const ranks = (await import('js-tiktoken/ranks/' + e)).default
  const pat = ranks.pat_str.replaceAll('\\S', '[^' + W + ']').replaceAll('[^\\s', '[^' + W).replaceAll('\\s', '[' + W + ']')
  const enc = new Tiktoken({ ...ranks, pat_str: pat })
  out[e] = texts.map(t => enc.encode(t, [], []))
}
console.log(JSON.stringify(out))
`

// White space is tiktoken's (Unicode's White_Space, as Rust's regex has
// \s): a byte order mark inside the text (U+FEFF) is not white space and
// NEL (U+0085) is, where js-tiktoken, on JavaScript's \s, has it the
// other way round; every other Unicode space and the format characters
// near them are checked too. The tokens equal js-tiktoken's with its
// patterns' \s made White_Space.
func TestCorpusBuildTiktokenWhiteSpace(t *testing.T) {
	if testing.Short() {
		t.Skip("the js-tiktoken peer: slow; go test without -short runs it")
	}
	t.Parallel()
	spaces := []string{"\ufeff", "\u0085", "\u00a0", "\u1680", "\u2000", "\u200a", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u180e", "\x0b", "\x0c", "\x1c", "\x1f"}
	var texts []string
	for _, s := range spaces {
		texts = append(texts, "a"+s+"b", "x "+s+"1", s+s+" y", "end"+s, "it"+s+"'s", "q"+s+s+s+"\n z", "<"+s+">")
	}
	encodings := tiktokenNames()
	var js map[string][][]int64
	corpusNode(t, corpusJSTiktokenWhiteSpace, map[string]any{"encodings": encodings, "texts": texts}, &js, "js-tiktoken")
	dir := t.TempDir()
	in := filepath.Join(dir, "docs.jsonl")
	corpusWriteJSONL(t, in, "text", "", texts)
	for _, enc := range encodings {
		prefix := filepath.Join(dir, enc)
		corpusMustRun(t, "corpus", "build", "--tokenizer", enc, "--out", prefix, in)
		got := corpusNumpyRead(t, prefix).docs()
		require.Len(t, got, len(texts))
		for i := range texts {
			assert.Equal(t, js[enc][i], got[i], "%s, document %d: %q", enc, i, texts[i])
		}
	}
}

// A line longer than maxLineBytes is an error naming its file and line,
// before it is tokenized (its memory would be some 100 times its size).
func TestCorpusBuildLineTooLong(t *testing.T) {
	defer func(n int) { maxLineBytes = n }(maxLineBytes)
	maxLineBytes = 1 << 10
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	corpusWriteJSONL(t, in, "text", "", []string{"short", strings.Repeat("word ", 300), "after"})
	code, _, stderr := tb(t, context.Background(), "corpus", "build", "--tokenizer", "r50k_base", "--out", filepath.Join(dir, "c"), in)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, in+":2: a line of more than 1024 bytes")
	assert.NoFileExists(t, filepath.Join(dir, "c.bin"))
}
