// Package s3 is the S3 store of package shards: imported, it makes
// s3://bucket/key URLs readable by shards' Opener, Source and List (and
// writable by shards.Upload), from AWS S3 or any S3-compatible server (MinIO, versitygw, Ceph, R2...):
//
//	import _ "github.com/tensorbatch/tensorbatch/shards/s3"
//
// The client is configured as the AWS CLI is (NewClient); set an Opener's
// Stores["s3"] to New(client) for one of your own.
package s3

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tensorbatch/tensorbatch/shards/store"
)

func init() {
	store.Register(store.Driver{Name: "S3", Schemes: []string{"s3"}, Bucket: "bucket", Open: open,
		Endpoint: "set AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL, or endpoint_url in ~/.aws/config) to the S3 server's URL"})
}

// open returns the store of the environment's client, whose requests go
// through h: the Opener's HTTPClient when set, else a client of the SDK's
// transport (which holds the roots of AWS_CA_BUNDLE or ca_bundle) with the
// Opener's timeouts.
func open(ctx context.Context, h store.HTTP) (store.Store, error) {
	c, err := NewClient(ctx, func(o *s3.Options) {
		if b, ok := o.HTTPClient.(*awshttp.BuildableClient); ok && h.New != nil {
			o.HTTPClient = h.New(b.GetTransport())
		} else {
			o.HTTPClient = h.Client
		}
	})
	if err != nil {
		return nil, err
	}
	return New(c), nil
}

// NewClient returns an S3 client configured as the AWS CLI is: from
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION
// (else AWS_DEFAULT_REGION), AWS_PROFILE, AWS_ENDPOINT_URL_S3 (else
// AWS_ENDPOINT_URL) and the files ~/.aws/config and ~/.aws/credentials
// (or AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE), including their
// endpoint_url settings, and AWS_CA_BUNDLE (or ca_bundle) for the
// certificates of an HTTPS endpoint. A custom endpoint (MinIO, versitygw,
// Ceph, R2...) is addressed path-style (http://host/bucket/key), as the
// AWS CLI does for one; without a region, us-east-1. optFns adjust the
// client's options last.
func NewClient(ctx context.Context, optFns ...func(*s3.Options)) (*s3.Client, error) {
	cfgFile, credFile := "", "" // the SDK's defaults, where there is a home
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		cfgFile, credFile = filepath.Join(home, ".aws", "config"), filepath.Join(home, ".aws", "credentials")
	}
	if err := store.CheckFiles(
		"AWS_CONFIG_FILE", cfgFile,
		"AWS_SHARED_CREDENTIALS_FILE", credFile,
		"AWS_WEB_IDENTITY_TOKEN_FILE", "",
		"AWS_CA_BUNDLE", "",
	); err != nil {
		return nil, err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	fns := append([]func(*s3.Options){func(o *s3.Options) {
		if o.BaseEndpoint != nil {
			o.UsePathStyle = true
		}
	}}, optFns...)
	return s3.NewFromConfig(cfg, fns...), nil
}

// New returns the store of client c, for an Opener's Stores["s3"].
func New(c *s3.Client) store.Store { return s3Store{c} }

// s3Store reads s3:// URLs. The SDK's own retries are off: the Opener
// retries, and counts.
type s3Store struct{ c *s3.Client }

// Get GETs s3://bucket/key from a byte offset with a range request.
func (s s3Store) Get(ctx context.Context, bucket, key string, off, n int64) (io.ReadCloser, store.Info, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if r := store.RangeHeader(off, n); r != "" {
		in.Range = aws.String(r)
	}
	out, err := s.c.GetObject(ctx, in, func(o *s3.Options) {
		o.Retryer = aws.NopRetryer{}
		// A whole-object checksum cannot check a read that resumes by
		// ranges; the body length is checked instead.
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	if err != nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable && store.PastEnd(off, n) {
			return nil, store.Info{}, store.ErrPastEnd
		}
		return nil, store.Info{}, s3Error(err)
	}
	info := store.Info{Version: aws.ToString(out.ETag)}
	length := int64(-1)
	if out.ContentLength != nil {
		length = *out.ContentLength
	}
	if info.Size, err = store.RangeTotal(off, aws.ToString(out.ContentRange), length); err != nil {
		out.Body.Close()
		return nil, store.Info{}, err
	}
	// The ETag of an object uploaded in one part is its MD5.
	if etag, err := hex.DecodeString(strings.Trim(info.Version, `"`)); err == nil {
		info.MD5 = store.MD5(etag)
	}
	return out.Body, info, nil
}

// maxPut is the most bytes one PutObject takes.
const maxPut = 5 << 30

// Put writes s3://bucket/key by one PutObject.
func (s s3Store) Put(ctx context.Context, bucket, key string, body io.ReadSeeker, size int64) error {
	if size > maxPut {
		return fmt.Errorf("%d bytes: S3 takes at most 5 GiB in one PutObject: make smaller shards", size)
	}
	_, err := s.c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: body, ContentLength: aws.Int64(size)},
		func(o *s3.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		return s3Error(err)
	}
	return nil
}

// List lists a page of s3://bucket/prefix (ListObjectsV2).
func (s s3Store) List(ctx context.Context, bucket, prefix, token string, pageSize int) ([]string, string, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix), Delimiter: aws.String("/")}
	if pageSize > 0 {
		in.MaxKeys = aws.Int32(int32(pageSize))
	}
	if token != "" {
		in.ContinuationToken = aws.String(token)
	}
	out, err := s.c.ListObjectsV2(ctx, in, func(o *s3.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		return nil, "", s3Error(err)
	}
	keys := make([]string, 0, len(out.Contents))
	for _, obj := range out.Contents {
		keys = append(keys, aws.ToString(obj.Key))
	}
	if !aws.ToBool(out.IsTruncated) {
		return keys, "", nil
	}
	return keys, aws.ToString(out.NextContinuationToken), nil
}

// s3Error turns an SDK error into a short one that keeps the status (a
// store.StatusError), or marks a failure to send or to read a response
// as transient. Missing credentials come first: the SDK's account of
// them holds the failed requests of its credential providers (the EC2
// metadata service's), which are not the store's.
func s3Error(err error) error {
	if cerr := credentialsError(err); cerr != err {
		return cerr
	}
	var se *smithyhttp.RequestSendError
	if errors.As(err, &se) {
		return &store.TransientError{Err: &sendError{err}}
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() < 300 {
		// No response, or a success whose body did not arrive whole (a
		// smithy.DeserializationError): not a status.
		var de *smithy.DeserializationError
		if errors.As(err, &de) {
			return &store.TransientError{Err: err}
		}
		return err
	}
	msg := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		msg = ae.ErrorCode()
		if m := ae.ErrorMessage(); m != "" {
			msg += ": " + m
		}
	}
	return &store.StatusError{Code: re.HTTPStatusCode(), Message: msg, Err: err}
}

// credentialsError says what to set when the SDK found no credentials,
// in one line instead of its account of the EC2 metadata service (which
// the error's chain keeps), as a store.ConfigError, which no retry
// mends; any other error is returned as it is. The SDK says so in words
// alone: "get identity: get credentials: ..." (its identity resolver),
// "failed to retrieve credentials" (its signer).
func credentialsError(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "get identity: ") && !strings.Contains(msg, "failed to retrieve credentials") {
		return err
	}
	what := "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (a profile of ~/.aws/credentials), or run where an instance role is attached"
	if p := os.Getenv("AWS_PROFILE"); p != "" {
		what = fmt.Sprintf("credentials for the profile %q in ~/.aws/credentials (AWS_PROFILE), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", p)
	}
	return &store.ConfigError{Msg: "no AWS credentials: set " + what, Err: err}
}

// sendError is a request that got no response: its message is the
// transport's (a refused connection, a timeout), without the SDK's
// framing; the chain keeps the SDK's error.
type sendError struct{ err error }

func (e *sendError) Error() string {
	var se *smithyhttp.RequestSendError
	errors.As(e.err, &se)
	return se.Err.Error()
}

func (e *sendError) Unwrap() error { return e.err }
