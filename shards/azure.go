package shards

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// NewAzureClient returns an Azure Blob Storage client configured from the
// environment, as the Azure CLI's storage commands are:
// AZURE_STORAGE_CONNECTION_STRING (Azurite's, too); else the account
// AZURE_STORAGE_ACCOUNT, at https://ACCOUNT.blob.core.windows.net/, with
// its key AZURE_STORAGE_KEY, else with DefaultAzureCredential (the
// AZURE_CLIENT_* variables, workload identity, managed identity, az
// login...). options may be nil.
func NewAzureClient(options *azblob.ClientOptions) (*azblob.Client, error) {
	if cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); cs != "" {
		return azblob.NewClientFromConnectionString(cs, options)
	}
	account := os.Getenv("AZURE_STORAGE_ACCOUNT")
	if account == "" {
		return nil, errors.New("no Azure storage account: set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT (and AZURE_STORAGE_KEY, or an identity DefaultAzureCredential finds)")
	}
	u := "https://" + account + ".blob.core.windows.net/"
	if key := os.Getenv("AZURE_STORAGE_KEY"); key != "" {
		cred, err := azblob.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, fmt.Errorf("AZURE_STORAGE_KEY: %w", err)
		}
		return azblob.NewClientWithSharedKeyCredential(u, cred, options)
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, err
	}
	return azblob.NewClient(u, cred, options)
}

func (o *Opener) azureClient() (*azblob.Client, error) {
	if o.Azure != nil {
		return o.Azure, nil
	}
	o.azOnce.Do(func() {
		var opts azblob.ClientOptions
		opts.Transport = o.httpClient()
		o.az, o.azErr = NewAzureClient(&opts)
	})
	return o.az, o.azErr
}

// azureStore reads az:// (and azblob://) URLs.
type azureStore struct{ c *azblob.Client }

// noRetries turns the SDK's retries off for a request: the Opener
// retries, and counts.
func noRetries(ctx context.Context) context.Context {
	return policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
}

func (s azureStore) fetcher(ctr, key string) fetcher {
	return func(ctx context.Context, off, n int64) (io.ReadCloser, objectInfo, error) {
		resp, err := s.c.DownloadStream(noRetries(ctx), ctr, key, &azblob.DownloadStreamOptions{Range: azblob.HTTPRange{Offset: off, Count: max(n, 0)}})
		if err != nil {
			var re *azcore.ResponseError
			if errors.As(err, &re) && re.StatusCode == http.StatusRequestedRangeNotSatisfiable && pastEnd(off, n) {
				return nil, objectInfo{}, errEOF
			}
			return nil, objectInfo{}, azureError(err)
		}
		info := objectInfo{md5: md5Of(resp.BlobContentMD5)} // the blob's, in a range's response
		if resp.ETag != nil {
			info.version = string(*resp.ETag)
		}
		length := int64(-1)
		if resp.ContentLength != nil {
			length = *resp.ContentLength
		}
		var cr string
		if resp.ContentRange != nil {
			cr = *resp.ContentRange
		} else if info.md5 == nil {
			info.md5 = md5Of(resp.ContentMD5) // the blob's, in a whole one's
		}
		if info.total, err = rangeTotal(off, cr, length); err != nil {
			resp.Body.Close()
			return nil, objectInfo{}, err
		}
		return resp.Body, info, nil
	}
}

func (s azureStore) list(ctx context.Context, ctr, prefix, token string) ([]string, string, error) {
	opts := &container.ListBlobsHierarchyOptions{Prefix: &prefix}
	if token != "" {
		opts.Marker = &token
	}
	if listPageSize > 0 {
		n := int32(listPageSize)
		opts.MaxResults = &n
	}
	page, err := s.c.ServiceClient().NewContainerClient(ctr).NewListBlobsHierarchyPager("/", opts).NextPage(noRetries(ctx))
	if err != nil {
		return nil, "", azureError(err)
	}
	keys := make([]string, 0, len(page.Segment.BlobItems))
	for _, b := range page.Segment.BlobItems {
		keys = append(keys, *b.Name)
	}
	next := ""
	if page.NextMarker != nil {
		next = *page.NextMarker
	}
	return keys, next, nil
}

// azureError turns an SDK error into a short one that keeps the status:
// a 404 matches errNotFound, a 5xx is transient.
func azureError(err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return &statusError{code: re.StatusCode, msg: re.ErrorCode, err: err}
	}
	return err
}
