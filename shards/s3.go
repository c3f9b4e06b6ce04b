package shards

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// NewS3Client returns an S3 client configured as the AWS CLI is: from
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION
// (else AWS_DEFAULT_REGION), AWS_PROFILE, AWS_ENDPOINT_URL_S3 (else
// AWS_ENDPOINT_URL) and the files ~/.aws/config and ~/.aws/credentials
// (or AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE), including their
// endpoint_url settings, and AWS_CA_BUNDLE (or ca_bundle) for the
// certificates of an HTTPS endpoint; an Opener's requests keep them. A custom endpoint (MinIO, versitygw, Ceph, R2...)
// is addressed path-style (http://host/bucket/key), as the AWS CLI does
// for one; without a region, us-east-1. optFns adjust the client's
// options last.
func NewS3Client(ctx context.Context, optFns ...func(*s3.Options)) (*s3.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("shards: AWS configuration: %w", err)
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

// s3Store reads s3:// URLs.
type s3Store struct{ c *s3.Client }

// fetcher GETs s3://bucket/key from a byte offset with a range request.
// The SDK's own retries are off: the reader retries, and counts.
func (s s3Store) fetcher(bucket, key string) fetcher {
	return func(ctx context.Context, off, n int64) (io.ReadCloser, objectInfo, error) {
		in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
		if r := rangeHeader(off, n); r != "" {
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
			if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable && pastEnd(off, n) {
				return nil, objectInfo{}, errEOF
			}
			return nil, objectInfo{}, s3Error(err)
		}
		info := objectInfo{version: aws.ToString(out.ETag)}
		length := int64(-1)
		if out.ContentLength != nil {
			length = *out.ContentLength
		}
		if info.total, err = rangeTotal(off, aws.ToString(out.ContentRange), length); err != nil {
			out.Body.Close()
			return nil, objectInfo{}, err
		}
		// The ETag of an object uploaded in one part is its MD5.
		if etag, err := hex.DecodeString(strings.Trim(info.version, `"`)); err == nil {
			info.md5 = md5Of(etag)
		}
		return out.Body, info, nil
	}
}

// list lists a page of s3://bucket/prefix (ListObjectsV2).
func (s s3Store) list(ctx context.Context, bucket, prefix, token string) ([]string, string, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix), Delimiter: aws.String("/")}
	if listPageSize > 0 {
		in.MaxKeys = aws.Int32(int32(listPageSize))
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

// s3Error turns an SDK error into a short one that keeps the status: a
// 404 matches errNotFound, a 5xx is transient.
func s3Error(err error) error {
	var se *smithyhttp.RequestSendError
	if errors.As(err, &se) {
		return &sendError{err}
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() < 300 {
		// No response, or a success whose body did not arrive whole (a
		// smithy.DeserializationError): not a status.
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
	return &statusError{code: re.HTTPStatusCode(), msg: msg, err: err}
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

// s3Transient reports whether an SDK error is a failure to send or
// receive, worth retrying.
func s3Transient(err error) bool {
	var se *smithyhttp.RequestSendError
	var de *smithy.DeserializationError
	return errors.As(err, &se) || errors.As(err, &de)
}
