// Package objtest runs real object-store emulators on 127.0.0.1 for
// tests: fake-gcs-server for Google Cloud Storage and Azurite for Azure
// Blob Storage, each on a free port with in-memory or temp-dir storage,
// stopped at the test's cleanup. scripts/install-deps.sh installs them:
//
//	go install github.com/fsouza/fake-gcs-server@v1.56.1
//	npm install --prefix .cache/npm azurite@3.37.0   (in the repository)
//
// Without one, a test is skipped, saying how to install it, unless $CI
// is set (or $TB_REQUIRE_GCS, $TB_REQUIRE_AZURE): then it fails.
package objtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/tensorbatch/tensorbatch/internal/s3test"
)

// The releases the project installs and tests with.
const (
	FakeGCSVersion = "v1.56.1"
	AzuriteVersion = "3.37.0"
)

// Azurite's well-known development account and key.
const (
	AzureAccount = "devstoreaccount1"
	AzureKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Server is a running emulator.
type Server struct {
	addr  string // 127.0.0.1:port
	gcs   bool
	log   s3test.Log
	cmd   *exec.Cmd
	done  chan struct{}
	hc    *http.Client // of CreateBucket and Put: no connection outlives a request
	azure *azblob.Client
}

// GCS starts fake-gcs-server (memory backend) for the test.
func GCS(t testing.TB) *Server {
	t.Helper()
	bin, err := s3test.GoBinary("fake-gcs-server")
	if err != nil {
		need(t, "TB_REQUIRE_GCS", fmt.Errorf("%w (scripts/install-deps.sh, or go install github.com/fsouza/fake-gcs-server@%s)", err, FakeGCSVersion))
	}
	return start(t, true, func(host, port string) *exec.Cmd {
		return exec.Command(bin, "-scheme", "http", "-host", host, "-port", port, "-backend", "memory", "-log-level", "error")
	})
}

// Azure starts Azurite's blob service for the test, storing in a temp
// directory of t.
func Azure(t testing.TB) *Server {
	t.Helper()
	argv, err := azurite()
	if err != nil {
		need(t, "TB_REQUIRE_AZURE", fmt.Errorf("%w (scripts/install-deps.sh, or npm install --prefix .cache/npm azurite@%s in the repository)", err, AzuriteVersion))
	}
	dir := t.TempDir()
	s := start(t, false, func(host, port string) *exec.Cmd {
		return exec.Command(argv[0], append(argv[1:], "--blobHost", host, "--blobPort", port, "--location", dir,
			"--silent", "--skipApiVersionCheck", "--loose")...)
	})
	var opts azblob.ClientOptions
	opts.Transport = s.hc
	c, err := azblob.NewClientFromConnectionString(AzureConnectionString(s.Endpoint()), &opts)
	if err != nil {
		t.Fatalf("objtest: %v", err)
	}
	s.azure = c
	return s
}

// need skips the test for err, or fails it under $CI or $env.
func need(t testing.TB, env string, err error) {
	t.Helper()
	if os.Getenv("CI") != "" || os.Getenv(env) != "" {
		t.Fatalf("objtest: %v", err)
	}
	t.Skipf("objtest: %v", err)
}

// Addr returns the server's address, 127.0.0.1:port.
func (s *Server) Addr() string { return s.addr }

// Endpoint returns the URL clients reach the server at: for Azurite, the
// account's blob endpoint.
func (s *Server) Endpoint() string {
	if s.gcs {
		return "http://" + s.addr
	}
	return "http://" + s.addr + "/" + AzureAccount
}

// AzureConnectionString returns the connection string of Azurite's
// account at the blob endpoint (Endpoint, or a proxy in front of it).
func AzureConnectionString(endpoint string) string {
	return "DefaultEndpointsProtocol=http;AccountName=" + AzureAccount + ";AccountKey=" + AzureKey + ";BlobEndpoint=" + endpoint + ";"
}

// Setenv points the clients of the test at the server: GCS's
// STORAGE_EMULATOR_HOST, or AZURE_STORAGE_CONNECTION_STRING.
func (s *Server) Setenv(t testing.TB) {
	if s.gcs {
		t.Setenv("STORAGE_EMULATOR_HOST", s.addr)
	} else {
		t.Setenv("AZURE_STORAGE_CONNECTION_STRING", AzureConnectionString(s.Endpoint()))
	}
}

// CreateBucket makes a bucket (GCS) or container (Azure).
func (s *Server) CreateBucket(name string) error {
	if s.gcs {
		return s.gcsPost("/storage/v1/b", "application/json", fmt.Appendf(nil, `{"name":%q}`, name))
	}
	_, err := s.azure.CreateContainer(context.Background(), name, nil)
	return err
}

// Put uploads data as the object key of bucket, in one request.
func (s *Server) Put(bucket, key string, data []byte) error {
	if s.gcs {
		q := url.Values{"uploadType": {"media"}, "name": {key}}
		return s.gcsPost("/upload/storage/v1/b/"+url.PathEscape(bucket)+"/o?"+q.Encode(), "application/octet-stream", data)
	}
	_, err := s.azure.UploadBuffer(context.Background(), bucket, key, data, nil)
	return err
}

func (s *Server) gcsPost(path, typ string, body []byte) error {
	resp, err := s.hc.Post(s.Endpoint()+path, typ, bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("objtest: POST %s: %s", path, resp.Status)
	}
	return nil
}

// start runs the command cmd makes for a free port of 127.0.0.1 and waits
// until the server answers HTTP; t's cleanup kills it.
func start(t testing.TB, gcs bool, cmd func(host, port string) *exec.Cmd) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("objtest: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	host, port, _ := net.SplitHostPort(addr)
	s := &Server{addr: addr, gcs: gcs, cmd: cmd(host, port), done: make(chan struct{}),
		hc: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}}
	s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("objtest: starting %s: %v", s.cmd.Path, err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.Stop)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	for deadline := time.Now().Add(60 * time.Second); ; {
		select {
		case <-s.done:
			t.Fatalf("objtest: %s exited at start: %s", s.cmd.Path, s.log.String())
		default:
		}
		if resp, err := c.Get(s.Endpoint() + "/"); err == nil {
			resp.Body.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("objtest: %s did not answer on %s within 60s: %s", s.cmd.Path, addr, s.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server and waits for it to exit.
func (s *Server) Stop() {
	s.cmd.Process.Kill()
	<-s.done
}

// azurite returns the command line of Azurite's blob service: azurite-blob
// on PATH, else node and the main.js in .cache/npm of the repository (the
// first folder up from the working directory that has one).
func azurite() ([]string, error) {
	if p, err := exec.LookPath("azurite-blob"); err == nil {
		return []string{p}, nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("node is not installed")
	}
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	for {
		main := filepath.Join(dir, ".cache", "npm", "node_modules", "azurite", "dist", "src", "blob", "main.js")
		if _, err := os.Stat(main); err == nil {
			return []string{node, main}, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return nil, errors.New("azurite is not in .cache/npm of the repository")
		}
		dir = up
	}
}
