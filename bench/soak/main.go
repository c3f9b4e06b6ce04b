// Command soak is a fault-injection soak of the engine: until -duration is
// spent it builds loaders with random configurations over a synthetic
// dataset, injects faults whose outcome is known in advance (Fill errors,
// panics, runtime.Goexit, bad lengths, stuck Fills, a negative Len,
// cancellation, Close, break, batch misuse, resume states good and bad,
// loaders dropped without Close, typed-nil datasets), checks every batch and
// every epoch's end against that outcome, and prints a markdown table of
// what it did and saw. It exits non-zero on any violated invariant or
// leaked goroutine.
//
//	go run ./bench/soak -duration 60s   # make soak
//	go run ./bench/soak -seed 42        # replay a run's choices
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/csrc"
	"github.com/tensorbatch/tensorbatch/internal/fakecudart"
	"github.com/tensorbatch/tensorbatch/pinned"
)

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "how long to soak")
	flag.Uint64Var(&o.seed, "seed", 0, "seed of every random choice; 0 picks one from the clock (printed)")
	flag.BoolVar(&o.cuda, "cuda", true, "also soak the cuda backend on the fake CUDA runtime when it builds")
	flag.Parse()
	o.log = os.Stderr
	rep := run(o)
	rep.print(os.Stdout)
	if err := rep.err(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

type options struct {
	duration time.Duration
	seed     uint64
	cuda     bool
	corrupt  bool      // scribble on the first batch delivered, which the checks must catch
	log      io.Writer // violations as they happen
}

// kind is a fault the soak injects.
type kind int

const (
	none kind = iota
	fillError
	fillPanic
	badLength
	stuckFill
	negativeLen
	cancelCtx
	closeLoader
	breakLoop
	misuse
	fillGoexit   // a sample fault, drawn alone and only with workers
	badResume    // a loader resumed from a state that does not fit
	goodResume   // a loader resumed mid-epoch
	forgotLoader // a loader dropped without Close
	typedNil     // engine.New of a typed-nil dataset
	nKinds
)

var kindNames = [nKinds]string{"", "Fill returns an error", "Fill panics", `out-of-range "tok_len"`,
	"Fill ignores ctx and blocks", "Len() negative", "ctx cancelled at a batch", "Close from another goroutine",
	"break at a batch", "Release without Retain, Retain after last Release", "Fill calls runtime.Goexit",
	"Resume with a state that does not fit", "Resume mid-epoch", "Loader dropped without Close", "New of a typed-nil dataset"}

const (
	maxLen         = 8
	goroutineSlack = 2
)

var schema = collate.Schema{
	{Name: "index", DType: collate.Int64},
	{Name: "x", DType: collate.Float32, Shape: []int{3}},
	{Name: "tok", DType: collate.Int32, Shape: []int{collate.Dynamic}, MaxLen: maxLen, Pad: -7},
}

var errInjected = errors.New("soak: injected error")

type report struct {
	seed                           uint64
	elapsed                        time.Duration
	loaders, cudaLoaders, epochs   int
	batches, samples               int
	injected, reported             [nKinds]int
	spurious                       int // timeouts of Fills that were not stuck (an overloaded machine)
	violations                     int
	firstViolations                []string
	goroutinesStart, goroutinesEnd int
	rssStart, rssEnd               int64 // KiB; -1 where unknown
	abandoned, leaked, stuckLeft   int64
	cuda                           string
}

// err says why the run failed, or nil.
func (r *report) err() error {
	var errs []error
	if r.violations > 0 {
		errs = append(errs, fmt.Errorf("%d violated invariants (seed %d), first: %s", r.violations, r.seed, r.firstViolations[0]))
	}
	if r.goroutinesEnd > r.goroutinesStart+goroutineSlack {
		errs = append(errs, fmt.Errorf("%d goroutines at the end, %d at the start", r.goroutinesEnd, r.goroutinesStart))
	}
	return errors.Join(errs...)
}

func (r *report) print(w io.Writer) {
	kib := func(v int64) string {
		if v < 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.1f MiB", float64(v)/1024)
	}
	fmt.Fprintf(w, "| soak | |\n| --- | --- |\n")
	for _, row := range [][2]string{
		{"seed", strconv.FormatUint(r.seed, 10)},
		{"duration", r.elapsed.Round(100 * time.Millisecond).String()},
		{"loaders (cuda on the fake runtime)", fmt.Sprintf("%d (%d; %s)", r.loaders, r.cudaLoaders, r.cuda)},
		{"epochs", strconv.Itoa(r.epochs)},
		{"batches delivered", strconv.Itoa(r.batches)},
		{"samples delivered", strconv.Itoa(r.samples)},
		{"violations", strconv.Itoa(r.violations)},
		{"spurious timeouts (overload)", strconv.Itoa(r.spurious)},
		{"goroutines start → end", fmt.Sprintf("%d → %d", r.goroutinesStart, r.goroutinesEnd)},
		{"RSS start → end", kib(r.rssStart) + " → " + kib(r.rssEnd)},
		{"abandoned goroutines (Stats.Abandoned)", strconv.FormatInt(r.abandoned, 10)},
		{"leaked bytes (Stats.LeakedBytes)", strconv.FormatInt(r.leaked, 10)},
		{"stuck Fills still running after release", strconv.FormatInt(r.stuckLeft, 10)},
	} {
		fmt.Fprintf(w, "| %s | %s |\n", row[0], row[1])
	}
	fmt.Fprintf(w, "\n| fault | injected | reported |\n| --- | --- | --- |\n")
	for k := fillError; k < nKinds; k++ {
		fmt.Fprintf(w, "| %s | %d | %d |\n", kindNames[k], r.injected[k], r.reported[k])
	}
}

type soak struct {
	o     options
	rep   report
	rng   *rand.Rand
	where string // the loader and epoch being run, for violations

	release    chan struct{} // closed at the end: stuck Fills return
	stuckAlive atomic.Int64
	hits       [nKinds]atomic.Int64 // sample faults reached by a Fill
	progress   atomic.Int64
	engineErrs atomic.Int64 // errors the engine logged
	forgotten  int          // loaders dropped without Close

	gpu    *pinned.GPU // the fake runtime; nil without it
	stream csrc.Stream // the consumer's stream on it
}

func (s *soak) violate(format string, args ...any) {
	msg := s.where + ": " + fmt.Sprintf(format, args...)
	s.rep.violations++
	if len(s.rep.firstViolations) < 20 {
		s.rep.firstViolations = append(s.rep.firstViolations, msg)
	}
	if s.o.log != nil {
		fmt.Fprintln(s.o.log, "VIOLATION", msg)
	}
}

// run soaks the engine for o.duration and reports what it did and saw.
func run(o options) report {
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	s := &soak{o: o, rng: rand.New(rand.NewPCG(o.seed, 0x50a4)), release: make(chan struct{})}
	s.rep.seed = o.seed
	s.rep.goroutinesStart = runtime.NumGoroutine()
	s.rep.rssStart = rss()
	start := time.Now()

	prev := slog.Default()
	slog.SetDefault(slog.New(countErrors{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}), &s.engineErrs}))
	defer slog.SetDefault(prev)
	s.rep.cuda = s.openFake()
	stopWatch := s.watchdog()

	for no := 0; time.Since(start) < o.duration; no++ {
		s.loader(no)
	}

	stopWatch()
	if s.gpu != nil {
		if err := s.gpu.Runtime().StreamDestroy(s.stream); err != nil {
			s.violate("destroying the consumer's stream: %v", err)
		}
	}
	close(s.release)
	for deadline := time.Now().Add(2 * time.Second); s.stuckAlive.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	s.where = "end"
	if s.rep.stuckLeft = s.stuckAlive.Load(); s.rep.stuckLeft != 0 {
		s.violate("%d stuck Fills still running 2 s after their release", s.rep.stuckLeft)
	}
	if n := s.engineErrs.Load(); n > 0 {
		s.violate("the engine logged %d errors", n)
	}
	for _, k := range []kind{fillError, fillPanic, badLength, stuckFill, fillGoexit} {
		s.rep.injected[k] = int(s.hits[k].Load())
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		runtime.GC() // closes the loaders dropped without Close
		if s.rep.goroutinesEnd = runtime.NumGoroutine(); s.rep.goroutinesEnd <= s.rep.goroutinesStart {
			break
		}
	}
	if s.rep.goroutinesEnd <= s.rep.goroutinesStart+goroutineSlack {
		s.rep.reported[forgotLoader] = s.forgotten
	}
	s.rep.rssEnd = rss()
	s.rep.elapsed = time.Since(start)
	return s.rep
}

// openFake builds and selects the fake CUDA runtime, and says what came of it.
func (s *soak) openFake() string {
	if !s.o.cuda {
		return "off"
	}
	path, err := fakecudart.Build()
	if err != nil {
		return "not built: " + strings.SplitN(err.Error(), "\n", 2)[0]
	}
	os.Setenv(pinned.EnvCUDALib, path)
	os.Setenv("TB_FAKE_COPY_DELAY_US", "50")
	os.Setenv("TB_FAKE_JITTER", "1")
	sel, err := pinned.Select("cuda")
	if err != nil {
		return "not loaded: " + err.Error()
	}
	g := sel.Backend.(*pinned.GPU)
	st, err := g.Runtime().StreamCreate()
	if err != nil {
		return "no stream: " + err.Error()
	}
	s.gpu, s.stream = g, st
	return "fake runtime, copies 0–100 µs late"
}

// watchdog ends the process with every goroutine's stack when nothing
// progresses for 30 s: a hang in the engine is reported, not waited for.
func (s *soak) watchdog() (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		last, since := s.progress.Load(), time.Now()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if p := s.progress.Load(); p != last {
				last, since = p, time.Now()
			} else if time.Since(since) > 30*time.Second {
				fmt.Fprintf(os.Stderr, "soak: HANG: no progress for 30 s at %s (seed %d); goroutines:\n", s.where, s.o.seed)
				pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
				os.Exit(2)
			}
		}
	}()
	return func() { close(done); <-exited }
}

// countErrors passes error records to h and counts them.
type countErrors struct {
	slog.Handler
	n *atomic.Int64
}

func (c countErrors) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		c.n.Add(1)
	}
	return c.Handler.Handle(ctx, r)
}
func (c countErrors) WithAttrs(a []slog.Attr) slog.Handler {
	return countErrors{c.Handler.WithAttrs(a), c.n}
}
func (c countErrors) WithGroup(g string) slog.Handler {
	return countErrors{c.Handler.WithGroup(g), c.n}
}

// rss returns the resident set size in KiB from /proc/self/status, or -1.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// dataset is the synthetic dataset: every sample's bytes are a function of
// (seed, epoch, index), and the epoch's plan says which samples misbehave.
type dataset struct {
	s      *soak
	n      int
	seed   uint64
	negLen atomic.Bool
	plan   atomic.Pointer[plan]
	stuck  atomic.Int64 // stuck Fills entered
}

type plan struct {
	epoch  int
	faults map[int]kind // dataset index → sample fault
	action kind         // negativeLen, cancelCtx, closeLoader, breakLoop, misuse or none
	at     int          // the batch of the action
	after  time.Duration
}

func (d *dataset) Len() int {
	if d.negLen.Load() {
		return -1
	}
	return d.n
}

func (d *dataset) Schema() collate.Schema { return schema }

func (d *dataset) Fill(_ context.Context, s *engine.Slot) error {
	i := s.Index()
	h, _ := engine.SampleSeed(d.seed, s.Epoch(), i)
	collate.As[int64](s.Tensor("index"))[0] = int64(i)
	x := collate.As[float32](s.Tensor("x"))
	for j := range x {
		x[j] = xval(h, j)
	}
	tok := collate.As[int32](s.Sequence("tok", seqLen(h)))
	for r := range tok {
		tok[r] = tokval(h, r)
	}
	var k kind
	if p := d.plan.Load(); p != nil && p.epoch == s.Epoch() {
		k = p.faults[i]
	}
	if k != none {
		d.s.hits[k].Add(1)
	}
	switch k {
	case fillError:
		return fmt.Errorf("sample %d: %w", i, errInjected)
	case fillPanic:
		panic(fmt.Sprintf("soak: injected panic at sample %d", i))
	case badLength:
		collate.As[int64](s.Tensor("tok_len"))[0] = []int64{-1, maxLen + 1, 1 << 40}[h%3]
	case fillGoexit:
		runtime.Goexit()
	case stuckFill:
		d.stuck.Add(1)
		d.s.stuckAlive.Add(1)
		defer d.s.stuckAlive.Add(-1)
		<-d.s.release // ignores ctx
	}
	return nil
}

func xval(h uint64, j int) float32 { return float32(h >> (16 * j) & 0xffff) }
func seqLen(h uint64) int          { return int(h>>48) % (maxLen + 1) }
func tokval(h uint64, r int) int32 { return int32(h>>20)&0xffff + int32(r) }

// loader runs one loader with a random configuration through a few epochs,
// then closes it and checks what it holds.
func (s *soak) loader(no int) {
	rng := s.rng
	cfg := engine.Config{
		BatchSize:      1 + rng.IntN(16),
		Shuffle:        rng.IntN(2) == 0,
		Seed:           rng.Uint64(),
		DropLast:       rng.IntN(2) == 0,
		Workers:        rng.IntN(5),
		PrefetchFactor: rng.IntN(4),
		RestartWorkers: rng.IntN(2) == 0,
		WorldSize:      1,
		Backend:        "cpu",
	}
	if rng.IntN(5) < 2 {
		cfg.Timeout = time.Duration(30+rng.IntN(31)) * time.Millisecond
	}
	epochs := 1 + rng.IntN(5)
	if rng.IntN(4) == 0 { // room for the window's worth plus one held batch and every leaked one
		full := append(slices.Clone(schema), collate.Field{Name: "tok_len", DType: collate.Int64})
		layout, err := collate.NewLayout(full, cfg.BatchSize)
		if err != nil {
			panic(err)
		}
		page := int64(os.Getpagesize())
		cfg.MaxPinnedBytes = int64(3+epochs+rng.IntN(3)) * ((int64(layout.Size()) + page - 1) / page * page)
	}
	streamMode := 0 // 0: none named (host-side checks), 1: Config.Stream, 2: Batch.RecordStream
	if s.gpu != nil && rng.IntN(3) == 0 {
		cfg.Backend = "cuda"
		if streamMode = rng.IntN(3); streamMode == 1 {
			cfg.Stream = uintptr(s.stream)
		}
		s.rep.cudaLoaders++
	}
	d := &dataset{s: s, n: 1 + rng.IntN(300), seed: cfg.Seed}
	stuckOK := cfg.Timeout > 0 && cfg.Workers > 0
	plans := make([]plan, epochs)
	for e := range plans {
		plans[e] = s.plan(cfg, d.n, e, e == epochs-1, stuckOK)
	}

	name := fmt.Sprintf("loader %d (N=%d %+v, streams %d)", no, d.n, cfg, streamMode)
	s.where = name
	switch rng.IntN(8) {
	case 0:
		s.resume(d, cfg)
	case 1:
		s.forget(d, cfg)
	case 2:
		s.typedNil(cfg)
	}
	l, err := engine.New(d, cfg)
	if err != nil {
		s.violate("New: %v", err)
		return
	}
	s.rep.loaders++
	delivered, overload := 0, false
	var asyncClose chan struct{}
	for e, p := range plans {
		s.where = fmt.Sprintf("%s epoch %d", name, e)
		n, spurious, closing := s.epoch(l, d, cfg, streamMode, p)
		delivered += n
		overload = overload || spurious
		if closing != nil {
			asyncClose = closing
			break
		}
	}
	s.where = name + " Close"
	s.close(l, cfg, asyncClose)
	st := l.Stats()
	switch {
	case st.Batches != int64(delivered):
		s.violate("Stats.Batches %d, %d delivered", st.Batches, delivered)
	case overload && st.Abandoned < d.stuck.Load(), !overload && st.Abandoned != d.stuck.Load():
		s.violate("Stats.Abandoned %d, %d Fills stuck", st.Abandoned, d.stuck.Load())
	case st.Pool.Allocated != st.LeakedBytes || st.Pool.InUse != st.LeakedBytes:
		s.violate("after Close the pool holds %d bytes (%d in use), %d leaked", st.Pool.Allocated, st.Pool.InUse, st.LeakedBytes)
	case (st.Abandoned > 0) != (st.LeakedBytes > 0):
		s.violate("Stats.Abandoned %d but %d bytes leaked", st.Abandoned, st.LeakedBytes)
	case st.DevicePool.Allocated != 0:
		s.violate("after Close the device pool holds %d bytes", st.DevicePool.Allocated)
	case cfg.MaxPinnedBytes > 0 && max(st.Pool.Peak, st.DevicePool.Peak) > cfg.MaxPinnedBytes:
		s.violate("pool peaks %d host and %d device bytes, over MaxPinnedBytes", st.Pool.Peak, st.DevicePool.Peak)
	}
	for _, err := range l.Epoch(context.Background(), 0) {
		if !errors.Is(err, engine.ErrClosed) {
			s.violate("an epoch after Close gives %v, want ErrClosed", err)
		}
		break
	}
	s.rep.abandoned += st.Abandoned
	s.rep.leaked += st.LeakedBytes
}

// close closes l, in time even with a Fill stuck, and waits for the Close
// started by the epoch's fault, if any.
func (s *soak) close(l *engine.Loader, cfg engine.Config, async chan struct{}) {
	limit := cfg.Timeout + time.Second
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- l.Close() }()
	select {
	case err := <-done:
		if err != nil {
			s.violate("Close: %v", err)
		}
		if d := time.Since(start); d > limit {
			s.violate("Close took %v, more than Timeout + 1 s", d)
		}
	case <-time.After(limit + 5*time.Second):
		s.violate("Close hangs")
		return
	}
	if async != nil {
		<-async
	}
}

// plan draws the faults of epoch e: none, or one or two samples that
// misbehave, and at most one action of the consumer.
func (s *soak) plan(cfg engine.Config, n, e int, last, stuckOK bool) plan {
	rng := s.rng
	p := plan{epoch: e, faults: map[int]kind{}, at: -1}
	batches := order(cfg, n, e)
	if len(batches) > 0 && rng.IntN(100) < 45 {
		stuck := false
		for range 1 + rng.IntN(2) {
			b := batches[rng.IntN(len(batches))]
			k := fillError + kind(rng.IntN(4))
			if k == stuckFill && (!stuckOK || stuck) {
				k = fillError
			}
			stuck = stuck || k == stuckFill
			p.faults[b[rng.IntN(len(b))]] = k
		}
		if len(p.faults) == 1 && cfg.Workers > 0 && rng.IntN(4) == 0 {
			for i := range p.faults {
				p.faults[i] = fillGoexit
			}
		}
	}
	if rng.IntN(100) < 40 {
		p.action = negativeLen + kind(rng.IntN(int(misuse-negativeLen)+1))
		if p.action == closeLoader && !last {
			p.action = breakLoop
		}
		p.at = rng.IntN(max(len(batches), 1))
		p.after = time.Duration(rng.IntN(3000)) * time.Microsecond
	}
	return p
}

// order returns the batches of epoch e, as the loader must deliver them.
func order(cfg engine.Config, n, e int) [][]int {
	var sm engine.Sampler = engine.Sequential{N: n}
	if cfg.Shuffle {
		sm = engine.Shuffled{N: n, Seed: cfg.Seed}
	}
	return engine.Batched{Sampler: sm, Size: cfg.BatchSize, DropLast: cfg.DropLast}.Batches(e)
}

// outcome is how an epoch ends: after n batches, with the error of kind
// (none: no error) naming index for a sample fault.
type outcome struct {
	n     int
	kind  kind
	index int
}

// expect works out how epoch p ends. The first batch holding a faulty
// sample ends it: with its stuck sample's timeout, as that batch never
// completes, else with its first faulty sample's error; unless the
// consumer cancels or breaks first.
func expect(batches [][]int, p plan) outcome {
	if p.action == negativeLen {
		return outcome{kind: negativeLen}
	}
	end := outcome{n: len(batches)}
	for k, b := range batches {
		for _, i := range b {
			f := p.faults[i]
			if f == stuckFill || (f != none && end.kind == none) {
				end = outcome{n: k, kind: f, index: i}
			}
		}
		if end.kind != none {
			break
		}
	}
	switch {
	case p.action == cancelCtx && p.at < end.n && p.at+1 < len(batches):
		return outcome{n: p.at + 1, kind: cancelCtx}
	case p.action == breakLoop && p.at < end.n:
		return outcome{n: p.at + 1}
	}
	return end
}

// epoch runs epoch p of l and checks every batch and how it ends. It
// returns the batches delivered, whether a Fill that was not stuck timed
// out, and, for a Close fault, a channel closed once that Close returned.
func (s *soak) epoch(l *engine.Loader, d *dataset, cfg engine.Config, streamMode int, p plan) (n int, spurious bool, closing chan struct{}) {
	e := p.epoch
	batches := order(cfg, d.n, e)
	want := expect(batches, p)
	d.plan.Store(&p)
	d.negLen.Store(p.action == negativeLen)
	defer d.negLen.Store(false)
	s.rep.epochs++
	if p.action == negativeLen || p.action == closeLoader {
		s.rep.injected[p.action]++
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(e)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if p.action == closeLoader {
		closing = make(chan struct{})
		go func() {
			defer close(closing)
			time.Sleep(p.after)
			l.Close()
		}()
	}

	var scratch []byte // the consumer stream's copies of "index"
	var onDevice [][]byte
	if streamMode != 0 {
		var err error
		if scratch, err = s.gpu.HostAlloc(max(8, len(batches)*cfg.BatchSize*8)); err != nil {
			s.violate("HostAlloc: %v", err)
			return 0, false, closing
		}
		defer s.gpu.HostFree(scratch)
	}

	var held *engine.Batch
	heldMisuse := false
	unhold := func() {
		if held == nil {
			return
		}
		s.check(held, batches[held.IndexInEpoch()], cfg.Seed, e, "retained ")
		held.Release()
		if heldMisuse {
			got := catch(held.Retain)
			msg := fmt.Sprintf("engine: Retain on batch %d of epoch %d after its last Release: its buffers may hold another batch", held.IndexInEpoch(), e)
			if got != msg {
				s.violate("Retain after the last Release: panic %q, want %q", got, msg)
			} else {
				s.rep.reported[misuse]++
			}
		}
		held, heldMisuse = nil, false
	}
	var got error
loop:
	for b, err := range l.Epoch(ctx, e) {
		s.progress.Add(1)
		unhold()
		if err != nil {
			got = err
			break
		}
		if b.IndexInEpoch() != n || n >= len(batches) || !slices.Equal(b.Indices(), batches[n]) {
			s.violate("batch %d (number %d, indices %v) out of sampler order", n, b.IndexInEpoch(), b.Indices())
			n++
			continue
		}
		if s.o.corrupt && s.rep.batches == 0 {
			collate.As[int64](b.Tensor("index"))[0] ^= 1
		}
		s.check(b, batches[n], cfg.Seed, e, "")
		n++
		s.rep.batches++
		s.rep.samples += b.Len()
		if cfg.Backend == "cuda" {
			onDevice = s.device(b, streamMode, scratch, onDevice, rng)
		}
		if b.IndexInEpoch() == p.at && p.action != closeLoader {
			s.rep.injected[p.action]++
			switch p.action {
			case cancelCtx:
				cancel()
			case breakLoop:
				break loop
			case misuse:
				got := catch(b.Release)
				msg := fmt.Sprintf("engine: Release on batch %d of epoch %d without a matching Retain", b.IndexInEpoch(), e)
				if got != msg {
					s.violate("Release without Retain: panic %q, want %q", got, msg)
				}
				s.check(b, batches[n-1], cfg.Seed, e, "after a refused Release, ")
				b.Retain()
				held, heldMisuse = b, true
			}
		}
		if held == nil && rng.IntN(5) == 0 {
			b.Retain()
			held = b
		}
	}
	unhold()
	if streamMode != 0 {
		s.checkStream(scratch, onDevice)
	}

	var se *engine.SampleError
	switch {
	case p.action == closeLoader && n <= want.n && errors.Is(got, engine.ErrClosed):
		s.rep.reported[closeLoader]++
	case matches(got, want, e) && n == want.n:
		switch {
		case want.kind != none:
			s.rep.reported[want.kind]++
		case p.action == breakLoop && n == p.at+1:
			s.rep.reported[breakLoop]++ // it ended there, quietly
		}
	case errors.As(got, &se) && errors.Is(got, engine.ErrTimeout) && p.faults[se.Index] != stuckFill && n <= want.n:
		spurious = true
		s.rep.spurious++
		if s.o.log != nil {
			fmt.Fprintf(s.o.log, "soak: %s: a Fill that was not stuck timed out (machine overloaded?): %v\n", s.where, got)
		}
	default:
		s.violate("ended after %d batches with %v; want %d batches then %s (sample %d); plan %+v", n, got, want.n, kindNames[want.kind], want.index, p)
	}
	return n, spurious, closing
}

// matches reports whether err is the error outcome want expects.
func matches(err error, want outcome, epoch int) bool {
	var se *engine.SampleError
	sample := errors.As(err, &se) && se.Index == want.index && se.Epoch == epoch
	switch want.kind {
	case none:
		return err == nil
	case fillError:
		return sample && errors.Is(err, errInjected)
	case fillGoexit:
		return sample && errors.Is(err, engine.ErrGoexit)
	case fillPanic:
		return sample && se.Stack != nil && strings.Contains(err.Error(), fmt.Sprintf("panic: soak: injected panic at sample %d", want.index))
	case badLength:
		return sample && strings.Contains(err.Error(), fmt.Sprintf(`in "tok_len", want 0 to MaxLen (%d)`, maxLen))
	case stuckFill:
		return sample && errors.Is(err, engine.ErrTimeout)
	case negativeLen:
		return err != nil && strings.Contains(err.Error(), fmt.Sprintf("epoch %d: engine: Dataset.Len is -1, want >= 0", epoch))
	case cancelCtx:
		return errors.Is(err, context.Canceled)
	case closeLoader:
		return errors.Is(err, engine.ErrClosed)
	}
	return false
}

// check compares every field of b with the deterministic fill of its samples.
func (s *soak) check(b *engine.Batch, idx []int, seed uint64, epoch int, what string) {
	index := collate.As[int64](b.Tensor("index"))
	x := collate.As[float32](b.Tensor("x"))
	tokT := b.Tensor("tok")
	tok := collate.As[int32](tokT)
	lens := collate.As[int64](b.Tensor("tok_len"))
	longest := tokT.Dim(1)
	widest := 0
	for p, i := range idx {
		h, _ := engine.SampleSeed(seed, epoch, i)
		bad := index[p] != int64(i) || lens[p] != int64(seqLen(h))
		for j := range 3 {
			bad = bad || x[3*p+j] != xval(h, j)
		}
		for r := range longest {
			w := int32(-7)
			if r < seqLen(h) {
				w = tokval(h, r)
			}
			bad = bad || tok[p*longest+r] != w
		}
		widest = max(widest, seqLen(h))
		if bad {
			s.violate("%sbatch %d: sample %d at %d holds other data (index %d, len %d)", what, b.IndexInEpoch(), i, p, index[p], lens[p])
			return
		}
	}
	if longest != widest {
		s.violate("%sbatch %d: tok padded to %d, its longest sample has %d", what, b.IndexInEpoch(), longest, widest)
	}
}

// device checks b's device copy: on the host (no stream named), or by
// queueing a copy back on the consumer's stream, checked at the epoch's end.
func (s *soak) device(b *engine.Batch, streamMode int, scratch []byte, onDevice [][]byte, rng *rand.Rand) [][]byte {
	if !b.OnDevice() {
		s.violate("batch %d is not on the device", b.IndexInEpoch())
		return onDevice
	}
	dt := b.DeviceTensor("index")
	host := b.Tensor("index").Bytes()
	rt := s.gpu.Runtime()
	if streamMode == 0 {
		if rng.IntN(4) == 0 {
			back := make([]byte, dt.Bytes)
			if err := errors.Join(b.WaitDevice(), rt.CopyToHost(back, csrc.DevicePtr(dt.Ptr))); err != nil || !slices.Equal(back, host) {
				s.violate("batch %d: device copy differs from the host batch (%v)", b.IndexInEpoch(), err)
			}
		}
		return onDevice
	}
	off := 0
	for _, w := range onDevice {
		off += len(w)
	}
	dst := scratch[off : off+dt.Bytes]
	if err := errors.Join(rt.StreamWaitEvent(s.stream, csrc.Event(b.Event())), rt.CopyToHostAsync(dst, csrc.DevicePtr(dt.Ptr), s.stream)); err != nil {
		s.violate("batch %d: queueing on the consumer's stream: %v", b.IndexInEpoch(), err)
	}
	if streamMode == 2 {
		b.RecordStream(uintptr(s.stream))
	}
	return append(onDevice, slices.Clone(host))
}

// checkStream compares what the consumer's stream read from each device
// batch with the host batch.
func (s *soak) checkStream(scratch []byte, onDevice [][]byte) {
	if err := s.gpu.Runtime().StreamSynchronize(s.stream); err != nil {
		s.violate("StreamSynchronize: %v", err)
	}
	off := 0
	for k, w := range onDevice {
		if !slices.Equal(scratch[off:off+len(w)], w) {
			s.violate("batch %d: the consumer's stream read other data from the device batch", k)
		}
		off += len(w)
	}
}

// catch calls f and returns what it panicked with, as a string.
func catch(f func()) (msg string) {
	defer func() {
		if v := recover(); v != nil {
			msg = fmt.Sprint(v)
		}
	}()
	f()
	return "no panic"
}

// resume runs epoch 0 of a fresh loader up to a random batch, saves its
// State (through JSON), and checks that a loader resumed from it delivers
// exactly the rest, and that New refuses a state that does not fit.
func (s *soak) resume(d *dataset, cfg engine.Config) {
	d.plan.Store(nil)
	cfg.Backend, cfg.Stream, cfg.Timeout = "cpu", 0, 0
	batches := order(cfg, d.n, 0)
	if len(batches) < 2 {
		return
	}
	cut := s.rng.IntN(len(batches) - 1)
	l, err := engine.New(d, cfg)
	if err != nil {
		s.violate("resume: New: %v", err)
		return
	}
	var saved []byte
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			s.violate("resume: epoch 0: %v", err)
			break
		}
		if b.IndexInEpoch() == cut {
			saved, _ = json.Marshal(l.State())
			break
		}
	}
	l.Close()
	state := func(edit func(*engine.State)) *engine.State {
		var st engine.State
		if err := json.Unmarshal(saved, &st); err != nil {
			s.violate("resume: State JSON: %v", err)
		}
		edit(&st)
		return &st
	}
	bad := []func(*engine.State){
		func(st *engine.State) { st.Position = 1 << 40 },
		func(st *engine.State) { st.Position = -1 },
		func(st *engine.State) { st.Kind = engine.KindIterable },
		func(st *engine.State) { st.Epoch = -1 },
		func(st *engine.State) { st.Len++ },
		func(st *engine.State) { st.Done = []int{cut + 1, cut + 1} },
	}
	c := cfg
	c.Resume = state(bad[s.rng.IntN(len(bad))])
	s.rep.injected[badResume]++
	if l, err := engine.New(d, c); err == nil {
		l.Close()
		s.violate("resume: New accepted a state that does not fit: %+v", *c.Resume)
	} else if strings.Contains(err.Error(), "Config.Resume") {
		s.rep.reported[badResume]++
	} else {
		s.violate("resume: New's error does not name Config.Resume: %v", err)
	}

	c.Resume, c.Workers = state(func(*engine.State) {}), s.rng.IntN(5)
	s.rep.injected[goodResume]++
	l, err = engine.New(d, c)
	if err != nil {
		s.violate("resume: New with a good state: %v", err)
		return
	}
	defer l.Close()
	k := cut + 1
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			s.violate("resume: resumed epoch: %v", err)
			return
		}
		if k >= len(batches) || !slices.Equal(b.Indices(), batches[k]) {
			s.violate("resume: resumed batch %d holds %v, want batch %d of the epoch", b.IndexInEpoch(), b.Indices(), k)
			return
		}
		s.check(b, batches[k], cfg.Seed, 0, "resumed ")
		k++
	}
	if k == len(batches) {
		s.rep.reported[goodResume]++
	} else {
		s.violate("resume: the resumed epoch ended at batch %d of %d", k, len(batches))
	}
}

// forget runs a loader for a batch and drops it without Close: the
// collector must close it (the goroutine count at the end checks it).
func (s *soak) forget(d *dataset, cfg engine.Config) {
	d.plan.Store(nil)
	cfg.Backend, cfg.Stream, cfg.Timeout = "cpu", 0, 0
	l, err := engine.New(d, cfg)
	if err != nil {
		s.violate("forget: New: %v", err)
		return
	}
	for _, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			s.violate("forget: %v", err)
		}
		break
	}
	s.rep.injected[forgotLoader]++
	s.forgotten++
}

// typedNil checks that New refuses a nil *dataset with an error.
func (s *soak) typedNil(cfg engine.Config) {
	s.rep.injected[typedNil]++
	var nilDS *dataset
	defer func() {
		if v := recover(); v != nil {
			s.violate("New of a typed-nil dataset panicked: %v", v)
		}
	}()
	if _, err := engine.New(nilDS, cfg); err != nil {
		s.rep.reported[typedNil]++
	} else {
		s.violate("New accepted a typed-nil dataset")
	}
}
