package shards

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

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

// s3Fetcher GETs s3://bucket/key from a byte offset with a range request.
// The SDK's own retries are off: the reader retries, and counts.
func s3Fetcher(c *s3.Client, bucket, key string) fetcher {
	return func(ctx context.Context, off int64) (io.ReadCloser, objectInfo, error) {
		in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
		if off > 0 {
			in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
		}
		out, err := c.GetObject(ctx, in, func(o *s3.Options) {
			o.Retryer = aws.NopRetryer{}
			// A whole-object checksum cannot check a read that resumes by
			// ranges; the body length is checked instead.
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		})
		if err != nil {
			var re *awshttp.ResponseError
			if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable && off > 0 {
				return nil, objectInfo{}, errEOF
			}
			return nil, objectInfo{}, s3Error(err)
		}
		info := objectInfo{total: -1, version: aws.ToString(out.ETag)}
		switch {
		case out.ContentRange != nil:
			var first, last, total int64
			if _, err := fmt.Sscanf(*out.ContentRange, "bytes %d-%d/%d", &first, &last, &total); err != nil || first != off {
				out.Body.Close()
				return nil, objectInfo{}, fmt.Errorf("range from byte %d answered with Content-Range %q", off, *out.ContentRange)
			}
			info.total = total
		case off > 0:
			out.Body.Close()
			return nil, objectInfo{}, fmt.Errorf("range from byte %d answered with the whole object", off)
		case out.ContentLength != nil:
			info.total = *out.ContentLength
		}
		return out.Body, info, nil
	}
}

// s3Error turns an SDK error into a short one that keeps the status: a
// 404 matches errNotFound, a 5xx is transient.
func s3Error(err error) error {
	var se *smithyhttp.RequestSendError
	if errors.As(err, &se) {
		return &sendError{err}
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() == 0 {
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
