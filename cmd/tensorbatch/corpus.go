package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/corpus"
	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// newCorpusCmd is the corpus group: build, inspect.
func newCorpusCmd() *cobra.Command {
	c := &cobra.Command{Use: "corpus", Short: "Build and inspect Megatron-LM corpora"}
	c.AddCommand(newCorpusBuildCmd(), newCorpusInspectCmd())
	return c
}

// buildOptions are corpus build's flags.
type buildOptions struct {
	tokenizer string
	out       string
	key       string
	appendEOD bool
	eod       int64
	split     bool
	workers   int
	dtype     string
	skipBad   bool
}

func newCorpusBuildCmd() *cobra.Command {
	var o buildOptions
	c := &cobra.Command{
		Use:   "build --tokenizer NAME|tokenizer.json --out PREFIX FILE.jsonl[.gz|.zst]...",
		Short: "Tokenize JSONL text into a Megatron-LM indexed dataset (PREFIX.idx, PREFIX.bin)",
		Long: `build tokenizes the text of JSONL files into a Megatron-LM indexed dataset,
PREFIX.idx and PREFIX.bin, as Megatron's tools/preprocess_data.py does; the
loader reads it with corpus.Megatron, and Megatron-LM and NeMo read it too.

Input: JSONL files, plain, gzip or zstd (found by their first bytes, whatever
their names), or - for standard input. Each line is one JSON object, and one
document: the string under --json-key (default "text"); a list of strings
there is a document of that many sequences, as Megatron reads one. Blank
lines are skipped, and a UTF-8 byte order mark before a line's JSON is
ignored; bytes that are not UTF-8 become U+FFFD. A line that is not a JSON
object, lacks the key, or holds something other than a string there is an
error naming the file and the line, unless --skip-bad: then it is left out,
counted and listed in the summary.

Output: one document per JSON line, in input order (document d of the corpus
is the d-th document line of the files, in the order given). A document is
one sequence of its tokens; with --split-lines, each line of its text
(split after each newline, which stays with its line) is a sequence of its
own, the document spanning them all, as Megatron's --split-sentences
--keep-newlines makes one a sentence. Sequences of no tokens are left out; a
document of none is kept, empty, as Megatron keeps it. --append-eod appends
the end-of-document token to the last sequence of each document that has a
token: the tokenizer's end-of-text (<|endoftext|>, or for a tokenizer.json
the first of <|endoftext|>, <|end_of_text|>, </s>, <eos> it has), or --eod ID,
a token of the tokenizer. The token type is uint16 where the vocabulary has
fewer than 65500 tokens, else int32, as Megatron picks it, unless --dtype
says.

Tokenizers: the tiktoken encodings r50k_base (GPT-2), p50k_base, cl100k_base
and o200k_base, embedded (no download), encoded as tiktoken's encode_ordinary
does (the text "<|endoftext|>" in a document is text, not the token); or the
path of a Hugging Face tokenizer.json, encoded as the tokenizers library
does with add_special_tokens=False (added tokens in the text become their
ids, and no BOS is added). ` + hfTokenizerDoc + `

All cores tokenize (--workers); the output is the same, byte for byte, for
any --workers. Memory holds a window of documents, 4 bytes a sequence and
8 a document, not the corpus; tokenizing a line takes some 40 to 110 bytes
a byte of its text. The files are written under temporary names and renamed at
the end: Ctrl-C or an error leaves no PREFIX.idx or PREFIX.bin, and no
temporary file.`,
		Example: `  # GPT-2 tokens, an EOD after each document, from compressed shards
  tensorbatch corpus build --tokenizer r50k_base --append-eod \
      --out data/owt_text_document owt-*.jsonl.zst

  # a Hugging Face tokenizer, the "content" key, every line a sequence
  tensorbatch corpus build --tokenizer ./tokenizer.json --json-key content \
      --split-lines --append-eod --out data/code_text_document code.jsonl.gz`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runBuild(cmd, args, o) },
	}
	f := c.Flags()
	f.StringVar(&o.tokenizer, "tokenizer", "", "tiktoken encoding ("+strings.Join(tiktokenNames(), ", ")+") or the path of a byte-level BPE tokenizer.json")
	f.StringVar(&o.out, "out", "", "output prefix: writes PREFIX.idx and PREFIX.bin")
	f.StringVar(&o.key, "json-key", "text", "the JSON key that holds a document's text (Megatron's --json-keys)")
	f.BoolVar(&o.appendEOD, "append-eod", false, "append the end-of-document token to each document")
	f.Int64Var(&o.eod, "eod", -1, "the end-of-document token id (implies --append-eod; default: the tokenizer's end-of-text)")
	f.BoolVar(&o.split, "split-lines", false, "each line of a document's text is a sequence of its own (Megatron's --split-sentences, by lines)")
	f.IntVar(&o.workers, "workers", 0, "goroutines that tokenize (0: one a core)")
	f.StringVar(&o.dtype, "dtype", "", "token type: uint16, int32 or int64 (default: uint16 for a vocabulary under 65500 tokens, else int32)")
	f.BoolVar(&o.skipBad, "skip-bad", false, "leave out bad lines (not JSON, no key, not a string), count and list them")
	return c
}

// buildSummary is what corpus build reports.
type buildSummary struct {
	Prefix          string   `json:"prefix"`
	Idx             string   `json:"idx"`
	Bin             string   `json:"bin"`
	Tokenizer       string   `json:"tokenizer"`
	DType           string   `json:"dtype"`
	EOD             *int64   `json:"eod"`
	Files           int      `json:"files"`
	Documents       int      `json:"documents"`
	Sequences       int      `json:"sequences"`
	Tokens          int64    `json:"tokens"`
	InputBytes      int64    `json:"input_bytes"`
	BinBytes        int64    `json:"bin_bytes"`
	Seconds         float64  `json:"seconds"`
	TokensPerSecond float64  `json:"tokens_per_second"`
	Workers         int      `json:"workers"`
	BadLines        int64    `json:"bad_lines"`
	Bad             []string `json:"bad,omitempty"` // the first maxBadListed
}

// maxBadListed bounds the bad lines listed in the summary.
const maxBadListed = 20

// Sizes of the pipeline: a chunk is up to chunkBytes of lines (or
// chunkLines lines), the unit a worker tokenizes; about window chunks a
// worker are in flight, read or tokenized and waiting for their turn to
// be written (the memory of the build: each chunk's text and its
// tokens).
const (
	chunkBytes = 1 << 20
	chunkLines = 4096
	window     = 2
)

// maxLineBytes bounds a line: tokenizing one takes 40 to 110 bytes of
// memory a byte of its text, so a 32 MiB document may take 3.5 GB. A
// longer line is an error naming it. (A variable for the tests.)
var maxLineBytes = 32 << 20

// chunk is consecutive lines of one input, tokenized by one worker.
type chunk struct {
	file   string
	line   int    // of the first line, from 1
	data   []byte // the lines, back to back
	ends   []int  // where each line ends in data
	readTo int64  // input bytes read when the chunk was cut
	res    chan *chunkResult
}

// chunkResult is a chunk tokenized: its documents, as the sequence count
// of each, the length of each sequence, and their tokens back to back.
type chunkResult struct {
	docSeqs []int32
	seqLens []int32
	tokens  []int64
	bad     []string // lines left out (--skip-bad)
	err     error    // a bad line (without --skip-bad) or a tokenizer error: the build stops
}

// chunkHookKey keys a func() in the context that the build calls after
// each chunk is written: the tests interrupt a build with it.
type chunkHookKey struct{}

func runBuild(cmd *cobra.Command, inputs []string, o buildOptions) error {
	ctx := cmd.Context()
	start := time.Now()
	switch {
	case o.tokenizer == "":
		return usagef("corpus build: --tokenizer is required (%s, or the path of a tokenizer.json)", strings.Join(tiktokenNames(), ", "))
	case o.out == "":
		return usagef("corpus build: --out PREFIX is required")
	case o.key == "":
		return usagef("corpus build: --json-key is empty")
	case o.workers < 0:
		return usagef("corpus build: --workers %d, want 0 (one a core) or more", o.workers)
	}
	if o.workers == 0 {
		o.workers = runtime.GOMAXPROCS(0)
	}
	stdin := 0
	for _, in := range inputs {
		if in == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return usagef("corpus build: - (standard input) given %d times", stdin)
	}
	tok, err := newTokenizer(o.tokenizer)
	if err != nil {
		return err
	}
	var eod *int64
	if cmd.Flags().Changed("eod") {
		if o.eod < 0 || o.eod >= int64(tok.VocabSize()) {
			return usagef("corpus build: --eod %d, outside %s's vocabulary of %d tokens", o.eod, tok.Name(), tok.VocabSize())
		}
		if _, err := tok.Decode([]int64{o.eod}); err != nil {
			return usagef("corpus build: --eod %d: no token of %s has that id", o.eod, tok.Name())
		}
		eod = &o.eod
	} else if o.appendEOD {
		id, _, ok := tok.EOD()
		if !ok {
			return usagef("corpus build: --append-eod: %s has none of the end-of-text tokens %s; name one with --eod ID", tok.Name(), strings.Join(hfEODs, ", "))
		}
		eod = &id
	}
	dtype, err := buildDType(o.dtype, tok)
	if err != nil {
		return err
	}

	var total int64
	for _, in := range inputs {
		if in == "-" {
			total = -1
			continue
		}
		fi, err := os.Stat(in)
		if err != nil {
			return err
		}
		if total >= 0 {
			total += fi.Size()
		}
	}

	w, err := corpus.NewMegatronWriter(o.out, dtype)
	if err != nil {
		return err
	}
	defer w.Abort() // after Close, nothing
	bar := newProgress(cmd, total, "bytes", true)
	defer bar.done()

	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(gctx)
	order := make(chan *chunk, window*o.workers)
	work := make(chan *chunk, window*o.workers)
	var read atomic.Int64
	// The reader is not in g: on Ctrl-C, a read of standard input may
	// block until its writer ends it, and nothing may wait for that.
	readErr := make(chan error, 1)
	go func() {
		defer close(order)
		defer close(work)
		readErr <- readInputs(gctx, cmd.InOrStdin(), inputs, &read, func(c *chunk) error {
			for _, ch := range []chan *chunk{order, work} {
				select {
				case ch <- c:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
			return nil
		})
	}()
	for range o.workers {
		g.Go(func() error {
			for {
				select {
				case c, ok := <-work:
					if !ok {
						return nil
					}
					c.res <- tokenizeChunk(c, tok, o, eod)
				case <-gctx.Done():
					return nil // stopping: do not tokenize
				}
			}
		})
	}

	sum := buildSummary{
		Prefix: o.out, Idx: o.out + ".idx", Bin: o.out + ".bin", Tokenizer: tok.Name(), DType: dtype.String(),
		EOD: eod, Files: len(inputs), Workers: o.workers,
	}
	hook, _ := ctx.Value(chunkHookKey{}).(func())
	werr := func() error {
		var seqs [][]int64
		var shown int64
		for {
			if err := gctx.Err(); err != nil {
				return err // a select below may pick a ready chunk over Done
			}
			var c *chunk
			select {
			case next, ok := <-order:
				if !ok {
					return nil
				}
				c = next
			case <-gctx.Done():
				return gctx.Err()
			}
			var r *chunkResult
			select {
			case r = <-c.res:
			case <-gctx.Done():
				return gctx.Err()
			}
			if r.err != nil {
				return r.err
			}
			at, t := 0, 0
			for _, n := range r.docSeqs {
				seqs = seqs[:0]
				for _, l := range r.seqLens[at : at+int(n)] {
					seqs = append(seqs, r.tokens[t:t+int(l)])
					t += int(l)
				}
				at += int(n)
				if err := w.AddDocument(seqs); err != nil {
					return err
				}
			}
			sum.BadLines += int64(len(r.bad))
			for _, b := range r.bad {
				if len(sum.Bad) < maxBadListed {
					sum.Bad = append(sum.Bad, b)
				}
			}
			bar.add(c.readTo - shown)
			shown = c.readTo
			secs := time.Since(start).Seconds()
			bar.describe(fmt.Sprintf("%d docs, %s tokens (%s tokens/s)", w.Documents(), si(float64(w.Tokens())), si(float64(w.Tokens())/secs)))
			if hook != nil {
				hook()
			}
		}
	}()
	cancel()
	gerr := g.Wait()
	var rerr error
	select {
	case rerr = <-readErr:
	case <-ctx.Done(): // interrupted: do not wait for a blocked read (see readErr)
	}
	switch {
	case ctx.Err() != nil:
		return ctx.Err() // interrupted: the deferred Abort removes the files
	case werr != nil && !errors.Is(werr, context.Canceled):
		return werr
	case rerr != nil && !errors.Is(rerr, context.Canceled):
		return rerr
	case gerr != nil:
		return gerr
	}
	if err := w.Close(); err != nil {
		return err
	}
	bar.done()
	secs := time.Since(start).Seconds()
	sum.Documents, sum.Sequences, sum.Tokens, sum.BinBytes = w.Documents(), w.Sequences(), w.Tokens(), w.Size()
	sum.InputBytes, sum.Seconds = read.Load(), secs
	if secs > 0 {
		sum.TokensPerSecond = float64(sum.Tokens) / secs
	}
	return emit(cmd, sum, func(out io.Writer) error {
		eodText := "none"
		if eod != nil {
			eodText = fmt.Sprint(*eod)
		}
		fmt.Fprintf(out, "wrote %s and %s\n", sum.Idx, sum.Bin)
		fmt.Fprintf(out, "documents  %d\nsequences  %d\ntokens     %d (%s, %s bytes)\n", sum.Documents, sum.Sequences, sum.Tokens, sum.DType, si(float64(sum.BinBytes)))
		fmt.Fprintf(out, "tokenizer  %s, EOD %s\n", sum.Tokenizer, eodText)
		fmt.Fprintf(out, "input      %sB in %s\n", si(float64(sum.InputBytes)), plural(int64(sum.Files), "file"))
		fmt.Fprintf(out, "time       %.2f s, %s tokens/s with %d workers\n", sum.Seconds, si(sum.TokensPerSecond), sum.Workers)
		if sum.BadLines > 0 {
			fmt.Fprintf(out, "skipped    %d bad lines", sum.BadLines)
			if int64(len(sum.Bad)) < sum.BadLines {
				fmt.Fprintf(out, " (the first %d:)", len(sum.Bad))
			}
			fmt.Fprintln(out)
			for _, b := range sum.Bad {
				fmt.Fprintf(out, "  %s\n", b)
			}
		}
		return nil
	})
}

// buildDType returns the token type --dtype names, or Megatron's choice
// for the vocabulary: uint16 under 65500 tokens, else int32.
func buildDType(name string, tok textTokenizer) (collate.DType, error) {
	n := tok.VocabSize()
	if name == "" {
		if n < 65500 {
			return collate.Uint16, nil
		}
		return collate.Int32, nil
	}
	var dt collate.DType
	limit := int64(math.MaxInt64)
	switch name {
	case "uint16":
		dt, limit = collate.Uint16, math.MaxUint16
	case "int32":
		dt, limit = collate.Int32, math.MaxInt32
	case "int64":
		dt = collate.Int64
	default:
		return 0, usagef("corpus build: --dtype %q, want uint16, int32 or int64", name)
	}
	if int64(n-1) > limit {
		return 0, usagef("corpus build: --dtype %s holds ids up to %d, and %s's reach %d", name, limit, tok.Name(), n-1)
	}
	return dt, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// readInputs reads the lines of the inputs in turn and sends them in
// chunks, each with its result channel.
func readInputs(ctx context.Context, stdin io.Reader, inputs []string, read *atomic.Int64, send func(*chunk) error) error {
	for _, name := range inputs {
		if err := readInput(ctx, stdin, name, read, send); err != nil {
			return err
		}
	}
	return nil
}

// readInput reads one input: a file, or - for stdin.
func readInput(ctx context.Context, stdin io.Reader, name string, read *atomic.Int64, send func(*chunk) error) error {
	var src io.Reader = stdin
	if name == "-" {
		name = "(stdin)"
	} else {
		f, err := regfile.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		src = f
	}
	r, closeDec, err := decompress(name, bufio.NewReaderSize(countingReader{src, read}, 1<<16))
	if err != nil {
		return err
	}
	defer closeDec()
	lr := bufio.NewReaderSize(r, 1<<20)
	line := 1
	newChunk := func() *chunk {
		return &chunk{file: name, line: line, data: make([]byte, 0, chunkBytes+chunkBytes/4), res: make(chan *chunkResult, 1)}
	}
	c := newChunk()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := len(c.data)
		var rerr error
		for {
			part, err := lr.ReadSlice('\n')
			c.data = append(c.data, part...)
			if len(c.data)-start > maxLineBytes {
				return fmt.Errorf("%s:%d: a line of more than %d bytes", name, line, maxLineBytes)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			rerr = err
			break
		}
		if rerr != nil && rerr != io.EOF {
			return fmt.Errorf("%s: line %d: %w", name, line, rerr)
		}
		if len(c.data) > start {
			c.ends = append(c.ends, len(c.data))
			line++
		}
		if rerr == io.EOF || len(c.data) >= chunkBytes || len(c.ends) >= chunkLines {
			if len(c.ends) > 0 {
				c.readTo = read.Load()
				if err := send(c); err != nil {
					return err
				}
				c = newChunk()
			}
		}
		if rerr == io.EOF {
			return nil
		}
	}
}

// decompress returns the text of an input: r itself, or r decompressed
// where its first bytes are gzip's or zstd's magic. A name ending .gz or
// .zst that holds something else is an error, as is xz or bzip2.
func decompress(name string, r *bufio.Reader) (io.Reader, func(), error) {
	magic, _ := r.Peek(6)
	has := func(m ...byte) bool { return bytes.HasPrefix(magic, m) }
	switch {
	case has(0x1f, 0x8b):
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err) // "gzip: invalid header"
		}
		return nameErrors{z, "gzip"}, func() { z.Close() }, nil
	case has(0x28, 0xb5, 0x2f, 0xfd) || len(magic) >= 4 && magic[0]&0xf0 == 0x50 && has(magic[0], 0x2a, 0x4d, 0x18):
		// a zstd frame, or a skippable frame (0x184D2A5?), which pzstd
		// writes before each frame
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: zstd: %w", name, err)
		}
		return nameErrors{z, "zstd"}, z.Close, nil
	case has(0xfd, '7', 'z', 'X', 'Z', 0):
		return nil, nil, fmt.Errorf("%s: compressed with xz; want plain, gzip or zstd", name)
	case has('B', 'Z', 'h'):
		return nil, nil, fmt.Errorf("%s: compressed with bzip2; want plain, gzip or zstd", name)
	case strings.HasSuffix(name, ".gz"):
		return nil, nil, fmt.Errorf("%s: named .gz, but not gzip", name)
	case strings.HasSuffix(name, ".zst"):
		return nil, nil, fmt.Errorf("%s: named .zst, but not zstd", name)
	}
	return r, func() {}, nil
}

// nameErrors prefixes a decompressor's errors with what it reads.
type nameErrors struct {
	r    io.Reader
	what string
}

func (n nameErrors) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	if err != nil && err != io.EOF && !strings.HasPrefix(err.Error(), n.what+": ") { // gzip's say so already
		err = fmt.Errorf("%s: %w", n.what, err)
	}
	return k, err
}

// tokenizeChunk tokenizes the documents of c.
func tokenizeChunk(c *chunk, tok textTokenizer, o buildOptions, eod *int64) *chunkResult {
	r := &chunkResult{}
	at := 0
	for i, end := range c.ends {
		// A UTF-8 byte order mark before the JSON (a file saved with one,
		// or such files concatenated) is not the line's.
		raw := bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(c.data[at:end]), utf8BOM))
		at = end
		if len(raw) == 0 {
			continue // a blank line
		}
		line := c.line + i
		texts, reason := documentTexts(raw, o.key)
		if reason != "" {
			msg := fmt.Sprintf("%s:%d: %s", c.file, line, reason)
			if !o.skipBad {
				r.err = errors.New(msg + " (--skip-bad leaves such lines out)")
				return r
			}
			r.bad = append(r.bad, msg)
			continue
		}
		var seqs int32
		for _, text := range texts {
			for _, s := range splitText(text, o.split) {
				before := len(r.tokens)
				var err error
				if r.tokens, err = tok.Encode(r.tokens, s); err != nil {
					r.err = fmt.Errorf("%s:%d: tokenizer %s: %w", c.file, line, tok.Name(), err)
					return r
				}
				if n := len(r.tokens) - before; n > 0 {
					if n > math.MaxInt32 {
						r.err = fmt.Errorf("%s:%d: %d tokens in a sequence, more than Megatron's index holds", c.file, line, n)
						return r
					}
					r.seqLens = append(r.seqLens, int32(n))
					seqs++
				}
			}
		}
		if eod != nil && seqs > 0 {
			r.tokens = append(r.tokens, *eod)
			r.seqLens[len(r.seqLens)-1]++
		}
		r.docSeqs = append(r.docSeqs, seqs)
	}
	return r
}

// utf8BOM is U+FEFF in UTF-8, the byte order mark.
var utf8BOM = []byte("\xef\xbb\xbf")

// documentTexts returns the texts of the document on a JSON line: the
// string under key, or the strings of a list there; or why the line is
// bad.
func documentTexts(line []byte, key string) ([]string, string) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return nil, fmt.Sprintf("a JSON %s, not an object", ute.Value)
		}
		return nil, "not JSON: " + err.Error()
	}
	if obj == nil {
		return nil, "a JSON null, not an object"
	}
	v, ok := obj[key]
	if !ok {
		return nil, fmt.Sprintf("no key %q", key)
	}
	switch v = bytes.TrimSpace(v); {
	case len(v) > 0 && v[0] == '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Sprintf("key %q: %v", key, err)
		}
		return []string{s}, ""
	case len(v) > 0 && v[0] == '[':
		var l []string
		if err := json.Unmarshal(v, &l); err != nil {
			return nil, fmt.Sprintf("key %q is a list of other than strings", key)
		}
		return l, ""
	}
	what := "a number"
	switch {
	case bytes.Equal(v, []byte("null")):
		what = "null"
	case bytes.Equal(v, []byte("true")) || bytes.Equal(v, []byte("false")):
		what = "a boolean"
	case len(v) > 0 && v[0] == '{':
		what = "an object"
	}
	return nil, fmt.Sprintf("key %q is %s, not a string", key, what)
}

// splitText returns text, or with split its lines, each with its
// newline.
func splitText(text string, split bool) []string {
	if !split {
		return []string{text}
	}
	return strings.SplitAfter(text, "\n")
}

// plural returns "n thing" or "n things".
func plural(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// si formats v with an SI prefix: 1.23 M.
func si(v float64) string {
	for _, u := range []string{"", " k", " M", " G", " T"} {
		if math.Abs(v) < 1000 || u == " T" {
			if u == "" {
				return fmt.Sprintf("%.0f", v)
			}
			return fmt.Sprintf("%.3g%s", v, u)
		}
		v /= 1000
	}
	return ""
}

// inspectOptions are corpus inspect's flags.
type inspectOptions struct {
	show      int
	tokens    int
	tokenizer string
}

func newCorpusInspectCmd() *cobra.Command {
	var o inspectOptions
	c := &cobra.Command{
		Use:   "inspect PREFIX",
		Short: "Count a Megatron-LM corpus's documents and tokens, and show one document",
		Long: `inspect reads the index of the Megatron-LM indexed dataset PREFIX.idx and
PREFIX.bin (PREFIX.idx or PREFIX.bin may be given for PREFIX) and prints its
documents, sequences and tokens, the token type, and the distribution of the
documents' lengths in tokens (min, p50, p90, p99, max, mean). With --show N,
it prints the first --tokens tokens of document N (from 0): as text with
--tokenizer (the one the corpus was built with), else as token ids. No
sequence length is needed: the corpus is read as it is.`,
		Example: `  tensorbatch corpus inspect data/owt_text_document
  tensorbatch corpus inspect data/owt_text_document --show 3 --tokenizer r50k_base
  tensorbatch corpus inspect data/owt_text_document.idx --show 0 --tokens 0 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runInspect(cmd, args[0], o) },
	}
	f := c.Flags()
	f.IntVar(&o.show, "show", -1, "show document N (from 0)")
	f.IntVar(&o.tokens, "tokens", 64, "tokens of the document to show (0: all)")
	f.StringVar(&o.tokenizer, "tokenizer", "", "decode the shown tokens to text with this tokenizer (as corpus build takes it)")
	return c
}

// inspectSummary is what corpus inspect reports.
type inspectSummary struct {
	Prefix    string        `json:"prefix"`
	DType     string        `json:"dtype"`
	Documents int           `json:"documents"`
	Sequences int           `json:"sequences"`
	Tokens    int64         `json:"tokens"`
	BinBytes  int64         `json:"bin_bytes"`
	Lengths   lengthSummary `json:"document_lengths"`
	Show      *shownDoc     `json:"show,omitempty"`
}

// lengthSummary is the distribution of the documents' lengths in tokens.
type lengthSummary struct {
	Min  int64   `json:"min"`
	P50  int64   `json:"p50"`
	P90  int64   `json:"p90"`
	P99  int64   `json:"p99"`
	Max  int64   `json:"max"`
	Mean float64 `json:"mean"`
}

// shownDoc is the document --show shows.
type shownDoc struct {
	Document  int     `json:"document"`
	Sequences int     `json:"sequences"`
	Tokens    int64   `json:"tokens"`
	IDs       []int64 `json:"ids"`
	Text      *string `json:"text,omitempty"`
}

func runInspect(cmd *cobra.Command, prefix string, o inspectOptions) error {
	prefix = strings.TrimSuffix(strings.TrimSuffix(prefix, ".idx"), ".bin")
	if o.tokens < 0 {
		return usagef("corpus inspect: --tokens %d, want 0 (all) or more", o.tokens)
	}
	var tok textTokenizer
	if o.tokenizer != "" {
		var err error
		if tok, err = newTokenizer(o.tokenizer); err != nil {
			return err
		}
	}
	x, err := corpus.ReadMegatronIndex(prefix)
	if err != nil {
		return err
	}
	ndoc := len(x.Documents) - 1
	sum := inspectSummary{Prefix: prefix, DType: x.DType.String(), Documents: ndoc, Sequences: len(x.Lengths), BinBytes: x.BinSize}
	lengths := make([]int64, ndoc)
	for d := range ndoc {
		for s := x.Documents[d]; s < x.Documents[d+1]; s++ {
			lengths[d] += int64(x.Lengths[s])
		}
		sum.Tokens += lengths[d]
	}
	if ndoc > 0 {
		slices.Sort(lengths)
		rank := func(p float64) int64 { return lengths[max(0, int(math.Ceil(p*float64(ndoc)))-1)] }
		sum.Lengths = lengthSummary{Min: lengths[0], P50: rank(0.5), P90: rank(0.9), P99: rank(0.99), Max: lengths[ndoc-1],
			Mean: float64(sum.Tokens) / float64(ndoc)}
	}
	if cmd.Flags().Changed("show") {
		if ndoc == 0 {
			return usagef("corpus inspect: --show %d: the corpus has no documents", o.show)
		}
		if o.show < 0 || o.show >= ndoc {
			return usagef("corpus inspect: --show %d, want a document from 0 to %d", o.show, ndoc-1)
		}
		show, err := readDocument(prefix+".bin", x, o.show, o.tokens)
		if err != nil {
			return err
		}
		if tok != nil {
			text, err := tok.Decode(show.IDs)
			if err != nil {
				return err
			}
			show.Text = &text
		}
		sum.Show = show
	}
	return emit(cmd, sum, func(out io.Writer) error {
		l := sum.Lengths
		fmt.Fprintf(out, "corpus     %s (.idx, .bin: %sB)\n", sum.Prefix, si(float64(sum.BinBytes)))
		fmt.Fprintf(out, "dtype      %s\ndocuments  %d\nsequences  %d\ntokens     %d\n", sum.DType, sum.Documents, sum.Sequences, sum.Tokens)
		fmt.Fprintf(out, "lengths    min %d, p50 %d, p90 %d, p99 %d, max %d, mean %.1f tokens a document\n", l.Min, l.P50, l.P90, l.P99, l.Max, l.Mean)
		if s := sum.Show; s != nil {
			fmt.Fprintf(out, "\ndocument %d: %s in %s; its first %d:\n", s.Document, plural(s.Tokens, "token"), plural(int64(s.Sequences), "sequence"), len(s.IDs))
			if s.Text != nil {
				fmt.Fprintln(out, *s.Text)
			} else {
				fmt.Fprintln(out, strings.Trim(fmt.Sprint(s.IDs), "[]"))
			}
		}
		return nil
	})
}

// readDocument reads the first n tokens (0: all) of document d.
func readDocument(bin string, x *corpus.MegatronIndex, d, n int) (*shownDoc, error) {
	first, end := x.Documents[d], x.Documents[d+1]
	show := &shownDoc{Document: d, Sequences: int(end - first), IDs: []int64{}}
	for s := first; s < end; s++ {
		show.Tokens += int64(x.Lengths[s])
	}
	f, err := regfile.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	es := int64(x.DType.Size())
	for s := first; s < end && (n == 0 || len(show.IDs) < n); s++ {
		k := int64(x.Lengths[s])
		if n > 0 {
			k = min(k, int64(n-len(show.IDs)))
		}
		buf := make([]byte, k*es)
		if _, err := f.ReadAt(buf, x.Pointers[s]); err != nil {
			return nil, fmt.Errorf("%s: sequence %d: %w", bin, s, err)
		}
		for i := range k {
			b := buf[i*es:]
			var v int64
			switch x.DType {
			case collate.Uint8:
				v = int64(b[0])
			case collate.Int8:
				v = int64(int8(b[0]))
			case collate.Int16:
				v = int64(int16(binary.LittleEndian.Uint16(b)))
			case collate.Uint16:
				v = int64(binary.LittleEndian.Uint16(b))
			case collate.Int32:
				v = int64(int32(binary.LittleEndian.Uint32(b)))
			case collate.Int64:
				v = int64(binary.LittleEndian.Uint64(b))
			}
			show.IDs = append(show.IDs, v)
		}
	}
	return show, nil
}
