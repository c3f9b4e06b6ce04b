// Package s3test runs a real S3-compatible server, versitygw with its
// posix backend, on 127.0.0.1 for tests and benchmarks: a temp directory
// for storage, credentials made up on the spot, stopped by Stop (or the
// test's cleanup). scripts/install-deps.sh installs versitygw with
//
//	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
package s3test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Version is the versitygw release the project installs and tests with.
const Version = "v1.8.0"

// Binary returns the path of versitygw (GoBinary), saying how to install
// it when it is missing.
func Binary() (string, error) {
	p, err := GoBinary("versitygw")
	if err != nil {
		return "", fmt.Errorf("%w (scripts/install-deps.sh, or go install github.com/versity/versitygw/cmd/versitygw@%s)", err, Version)
	}
	return p, nil
}

// GoBinary returns the path of a program that go install installs: on
// PATH, else in $GOBIN, $GOPATH/bin or ~/go/bin.
func GoBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if d := os.Getenv("GOPATH"); d != "" {
		dirs = append(dirs, filepath.Join(filepath.SplitList(d)[0], "bin"))
	}
	if h, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(h, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed", name)
}

// Server is a running versitygw.
type Server struct {
	Endpoint  string // http://127.0.0.1:port
	AccessKey string
	SecretKey string
	Region    string
	Dir       string // the posix backend's root: one folder per bucket

	bin  string
	addr string
	meta string // the objects' metadata (ETags), kept by Restart, removed by Stop
	log  Log

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts versitygw serving dir on a free port of 127.0.0.1 and
// waits until it answers.
func Start(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	// Metadata goes to a sidecar folder rather than xattrs, which not
	// every file system has: with none (--nometa) objects have no ETag.
	meta, err := os.MkdirTemp("", "s3test-meta-")
	if err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint: "http://" + addr, AccessKey: "tb" + token(8), SecretKey: token(20), Region: "us-east-1",
		Dir: dir, bin: bin, addr: addr, meta: meta,
	}
	if err := s.Restart(); err != nil {
		os.RemoveAll(meta)
		return nil, err
	}
	return s, nil
}

// ForTest starts a server on a temp directory of t, stopped at its
// cleanup. Without versitygw the test is skipped, saying how to install
// it, unless $CI or $TB_REQUIRE_S3 is set: then it fails.
func ForTest(t testing.TB) *Server {
	t.Helper()
	if _, err := Binary(); err != nil {
		if os.Getenv("CI") != "" || os.Getenv("TB_REQUIRE_S3") != "" {
			t.Fatalf("s3test: %v", err)
		}
		t.Skipf("s3test: %v", err)
	}
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

func token(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// Env returns the variables an AWS client reads to reach the server, as
// KEY=value; shared config and credential files are pointed at
// /dev/null so that the user's own do not interfere.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
		"AWS_ENDPOINT_URL_S3=" + s.Endpoint,
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_PROFILE=",
		"AWS_SESSION_TOKEN=",
		"AWS_ENDPOINT_URL=",
	}
}

// Setenv sets Env's variables for the test, unsetting those Env leaves
// empty (the AWS SDK tells an empty variable from an unset one).
func (s *Server) Setenv(t testing.TB) {
	for _, kv := range s.Env() {
		k, v, _ := cutEq(kv)
		t.Setenv(k, v)
		if v == "" {
			os.Unsetenv(k)
		}
	}
}

// CreateBucket makes a bucket.
func (s *Server) CreateBucket(name string) error {
	_, err := s.client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)})
	return err
}

// Put uploads data as the object key of bucket, in one part (so that its
// ETag is its MD5).
func (s *Server) Put(bucket, key string, data []byte) error {
	_, err := s.client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)})
	return err
}

// client is a client of the server's own, whose connections end with
// each request (so that none outlives a test's leak check).
func (s *Server) client() *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		HTTPClient:   &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	})
}

func cutEq(kv string) (string, string, bool) {
	for i := range len(kv) {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// Restart starts the server again after Kill (or starts it the first
// time), on the same address and directory, and waits until it answers.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("s3test: versitygw is already running")
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "--port", s.addr, "--access", s.AccessKey, "--secret", s.SecretKey,
		"--region", s.Region, "--quiet", "posix", "--sidecar", s.meta, s.Dir)
	cmd.Stdout, cmd.Stderr = &s.log, &s.log
	for _, kv := range os.Environ() { // the flags alone configure it
		if !strings.HasPrefix(kv, "VGW_") && !strings.HasPrefix(kv, "ROOT_ACCESS_KEY") && !strings.HasPrefix(kv, "ROOT_SECRET") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("s3test: starting versitygw: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(30 * time.Second)
	c := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("s3test: versitygw exited at start: %s", s.log.String())
		default:
		}
		if resp, err := c.Get(s.Endpoint + "/"); err == nil {
			resp.Body.Close()
			c.CloseIdleConnections()
			return nil
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("s3test: versitygw did not answer on %s within 30s: %s", s.addr, s.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log is a server's output, written by exec's copier while a test may
// read it.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns the output so far, without surrounding space.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(l.b.String())
}

// Kill stops the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Stop stops the server and removes its metadata; its directory stays.
func (s *Server) Stop() {
	s.Kill()
	os.RemoveAll(s.meta)
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Port returns the server's port.
func (s *Server) Port() int {
	_, p, _ := net.SplitHostPort(s.addr)
	n, _ := strconv.Atoi(p)
	return n
}

// DecodeTarJPEGs is the consumer of the bench's bare SDK loop: it reads
// the tar stream r with archive/tar into one reused buffer, calls decode
// on the bytes of each .jpg member, and returns how many it decoded.
func DecodeTarJPEGs(r io.Reader, decode func([]byte) error) (int, error) {
	tr := tar.NewReader(r)
	var buf bytes.Buffer // reused: a bare loop keeps no record
	n := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(tr); err != nil {
			return n, err
		}
		if strings.HasSuffix(h.Name, ".jpg") {
			if err := decode(buf.Bytes()); err != nil {
				return n, err
			}
			n++
		}
	}
}

// Shard returns a WebDataset tar of n records, ids first to first+n-1:
// each a .cls member holding id % 1000 and a .jpg member of member(id),
// as the S3 benchmarks upload.
func Shard(first, n int, member func(id int) []byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for id := first; id < first+n; id++ {
		for _, m := range []struct {
			ext  string
			data []byte
		}{{"cls", []byte(strconv.Itoa(id % 1000))}, {"jpg", member(id)}} {
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%08d.%s", id, m.ext), Mode: 0o644, Size: int64(len(m.data))}); err != nil {
				panic(err) // a valid header into memory cannot fail
			}
			tw.Write(m.data)
		}
	}
	tw.Close()
	return buf.Bytes()
}

// JPEG returns a side×side photo-like image (gradients and noise) of
// record id, encoded at quality 90.
func JPEG(id, side int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, side, side))
	x := uint32(id*2654435761 + 1)
	for py := range side {
		for px := range side {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			n := uint8(x & 31)
			img.Set(px, py, color.RGBA{uint8(px*255/side) + n, uint8(py*255/side) + n, uint8((px+py+id)*3) + n, 255})
		}
	}
	var buf bytes.Buffer
	jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90})
	return buf.Bytes()
}

// Raw returns n bytes of record id that no decoder reads: a pattern.
func Raw(id, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(id + i*13)
	}
	return b
}
