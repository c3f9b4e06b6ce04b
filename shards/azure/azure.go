// Package azure is the Azure Blob Storage store of package shards:
// imported, it makes az://container/key URLs (azblob:// too) readable by
// shards' Opener, Source and List, and writable by shards.Upload:
//
//	import _ "github.com/tensorbatch/tensorbatch/shards/azure"
//
// The client is configured from the environment (NewClient); set an
// Opener's Stores["az"] (and "azblob") to New(client) for one of your own.
package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/tensorbatch/tensorbatch/shards/store"
)

func init() {
	store.Register(store.Driver{Name: "Azure", Schemes: []string{"az", "azblob"}, Bucket: "container", Open: open,
		Endpoint: "check the BlobEndpoint of AZURE_STORAGE_CONNECTION_STRING, or the account AZURE_STORAGE_ACCOUNT"})
}

// NewClient returns an Azure Blob Storage client configured from the
// environment, as the Azure CLI's storage commands are:
// AZURE_STORAGE_CONNECTION_STRING (Azurite's, too); else the account
// AZURE_STORAGE_ACCOUNT, at https://ACCOUNT.blob.core.windows.net/, with
// its key AZURE_STORAGE_KEY, else with DefaultAzureCredential (the
// AZURE_CLIENT_* variables, workload identity, managed identity, az
// login...). options may be nil. Missing credentials are an error of one
// line that says what to set (a store.ConfigError), when the client is
// made or, for an identity, at its first request.
func NewClient(options *azblob.ClientOptions) (*azblob.Client, error) {
	if cs := os.Getenv("AZURE_STORAGE_CONNECTION_STRING"); cs != "" {
		return azblob.NewClientFromConnectionString(cs, options)
	}
	account := os.Getenv("AZURE_STORAGE_ACCOUNT")
	if account == "" {
		return nil, &store.ConfigError{Msg: "no Azure storage account: set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT (and AZURE_STORAGE_KEY, or an identity DefaultAzureCredential finds)"}
	}
	u := "https://" + account + ".blob.core.windows.net/"
	if key := os.Getenv("AZURE_STORAGE_KEY"); key != "" {
		cred, err := azblob.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, fmt.Errorf("AZURE_STORAGE_KEY: %w", err)
		}
		return azblob.NewClientWithSharedKeyCredential(u, cred, options)
	}
	if err := store.CheckFiles("AZURE_FEDERATED_TOKEN_FILE", "", "AZURE_CLIENT_CERTIFICATE_PATH", ""); err != nil {
		return nil, err
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, &store.ConfigError{Msg: "Azure identity (DefaultAzureCredential): " + firstLine(err.Error()), Err: err}
	}
	return azblob.NewClient(u, identity{cred, account}, options)
}

// identity is DefaultAzureCredential with a failure said in one line
// (its own lists each credential it tried, one a line), as a
// store.ConfigError, which no retry mends: the credential retries its
// token requests itself.
type identity struct {
	azcore.TokenCredential
	account string
}

func (c identity) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := c.TokenCredential.GetToken(ctx, opts)
	if err != nil && ctx.Err() == nil {
		err = &store.ConfigError{Msg: fmt.Sprintf("no Azure credentials for the storage account %q: set AZURE_STORAGE_KEY, or AZURE_STORAGE_CONNECTION_STRING, or an identity DefaultAzureCredential finds (AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET; workload or managed identity; az login)", c.account), Err: err}
	}
	return tok, err
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// open returns the store of the environment's client, whose requests go
// through h's client.
func open(_ context.Context, h store.HTTP) (store.Store, error) {
	var opts azblob.ClientOptions
	opts.Transport = h.Client
	c, err := NewClient(&opts)
	if err != nil {
		return nil, err
	}
	return New(c), nil
}

// New returns the store of client c, for an Opener's Stores["az"] and
// Stores["azblob"].
func New(c *azblob.Client) store.Store { return azureStore{c} }

// azureStore reads az:// (and azblob://) URLs.
type azureStore struct{ c *azblob.Client }

// noRetries turns the SDK's retries off for a request: the Opener
// retries, and counts.
func noRetries(ctx context.Context) context.Context {
	return policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
}

// Get downloads az://ctr/key from a byte offset with a range request.
func (s azureStore) Get(ctx context.Context, ctr, key string, off, n int64) (io.ReadCloser, store.Info, error) {
	resp, err := s.c.DownloadStream(noRetries(ctx), ctr, key, &azblob.DownloadStreamOptions{Range: azblob.HTTPRange{Offset: off, Count: max(n, 0)}})
	if err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusRequestedRangeNotSatisfiable && store.PastEnd(off, n) {
			return nil, store.Info{}, store.ErrPastEnd
		}
		return nil, store.Info{}, azureError(err)
	}
	info := store.Info{MD5: store.MD5(resp.BlobContentMD5)} // the blob's, in a range's response
	if resp.ETag != nil {
		info.Version = string(*resp.ETag)
	}
	length := int64(-1)
	if resp.ContentLength != nil {
		length = *resp.ContentLength
	}
	var cr string
	if resp.ContentRange != nil {
		cr = *resp.ContentRange
	} else if info.MD5 == nil {
		info.MD5 = store.MD5(resp.ContentMD5) // the blob's, in a whole one's
	}
	if info.Size, err = store.RangeTotal(off, cr, length); err != nil {
		resp.Body.Close()
		return nil, store.Info{}, err
	}
	return resp.Body, info, nil
}

// Put writes az://ctr/key as a block blob, in blocks (UploadStream).
func (s azureStore) Put(ctx context.Context, ctr, key string, body io.ReadSeeker, _ int64) error {
	if _, err := s.c.UploadStream(noRetries(ctx), ctr, key, body, nil); err != nil {
		return azureError(err)
	}
	return nil
}

// List lists a page of az://ctr/prefix (List Blobs, by hierarchy).
func (s azureStore) List(ctx context.Context, ctr, prefix, token string, pageSize int) ([]string, string, error) {
	opts := &container.ListBlobsHierarchyOptions{Prefix: &prefix}
	if token != "" {
		opts.Marker = &token
	}
	if pageSize > 0 {
		n := int32(pageSize)
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

// azureError turns an SDK error into a short one that keeps the status
// (a store.StatusError).
func azureError(err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return &store.StatusError{Code: re.StatusCode, Message: re.ErrorCode, Err: err}
	}
	return err
}
