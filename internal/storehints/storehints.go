// Package storehints says what fixes a store that refuses a table: the
// driver import a cloud URL needs, the setting its SDK's error points to,
// the azblob:// URL of Spark's Azure URL. sink/delta and its package
// blobstore both word their errors with it.
package storehints

import (
	"fmt"
	"net/url"
	"strings"
)

// A storeHint is what fixes a store's refusal, found by a text its SDK's
// error holds.
type storeHint struct {
	scheme string   // s3, gs or azblob
	texts  []string // any of them in the error's text
	hint   string
}

// storeHints, for the first store operations of a table (opening its
// bucket, listing its log), where a store that is not set up fails. The
// texts are the SDKs' own: seen in their errors (tests of package
// alldrivers and reliability), or error codes the stores document (S3 API
// Reference, "Error responses"; Azure Blob Storage, "Blob service error
// codes").
var storeHints = []storeHint{
	{"s3", []string{"Invalid region", "region was not a valid DNS name"},
		"S3 needs a region: add region=<region> to the URL (s3://bucket/path?region=eu-west-1), or set AWS_REGION"},
	{"s3", []string{"get credentials:", "failed to refresh cached credentials", "NoCredentialProviders"},
		"S3 found no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile (AWS_PROFILE, or profile= in the URL), or run with an IAM role"},
	{"s3", []string{"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"},
		"S3 refused the credentials: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the profile's), and AWS_SESSION_TOKEN for temporary ones"},
	{"s3", []string{"AccessDenied"},
		"the credentials may not use this bucket: allow s3:ListBucket on it and s3:GetObject, s3:PutObject and s3:DeleteObject on the table's prefix"},
	{"s3", []string{"NoSuchBucket"},
		"the bucket does not exist: create it, or check its name (and region= or endpoint= in the URL)"},
	{"azblob", []string{"AccountName is required"},
		"Azure needs the storage account: set AZURE_STORAGE_ACCOUNT, with AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or Microsoft Entra ID credentials (or set AZURE_STORAGE_CONNECTION_STRING)"},
	{"azblob", []string{"DefaultAzureCredential"},
		"no Microsoft Entra ID credential was found: az login, a managed or workload identity, or AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET; or set AZURE_STORAGE_KEY"},
	{"azblob", []string{"AuthenticationFailed"},
		"Azure refused the credentials: check AZURE_STORAGE_KEY (or AZURE_STORAGE_SAS_TOKEN) against the account AZURE_STORAGE_ACCOUNT names"},
	{"azblob", []string{"AuthorizationPermissionMismatch", "AuthorizationFailure"},
		"the identity may not use this container: give it the Storage Blob Data Contributor role on it"},
	{"azblob", []string{"ContainerNotFound"},
		"the container does not exist: create it, or check its name (the URL's host) and AZURE_STORAGE_ACCOUNT"},
	{"gs", []string{"could not find default credentials", "private key should be a PEM"},
		"GCS found no usable credentials: set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, run gcloud auth application-default login, or run with a service account on Google Cloud"},
	{"gs", []string{"Error 403"},
		"the credentials may not use this bucket: grant them roles/storage.objectAdmin on it"},
	{"gs", []string{"bucket doesn't exist"},
		"the bucket does not exist: create it, or check its name"},
}

// Hint returns what fixes err, a refusal of rawURL's store, when
// storeHints knows it; else "".
func Hint(rawURL string, err error) string {
	u, perr := url.Parse(rawURL)
	if err == nil || perr != nil {
		return ""
	}
	msg := err.Error()
	for _, h := range storeHints {
		if h.scheme != u.Scheme {
			continue
		}
		for _, text := range h.texts {
			if strings.Contains(msg, text) {
				return h.hint
			}
		}
	}
	return ""
}

// Wrap returns err with what fixes it first (Lead), when err is a
// refusal of rawURL's store that storeHints knows; else err.
func Wrap(rawURL string, err error) error {
	if h := Hint(rawURL, err); h != "" {
		return Lead(rawURL, h, err)
	}
	return err
}

// Lead returns err with hint, what fixes it, first. The store's own
// message stays, and errors.Is and errors.As see through.
func Lead(rawURL, hint string, err error) error {
	return fmt.Errorf("delta: table %s: %s (the store said: %w)", rawURL, hint, err)
}

// ADLSURLError answers Spark's URL of an Azure storage account
// (abfss://container@account.dfs.core.windows.net/path, or wasbs:// with
// blob.core.windows.net), which no gocloud.dev driver takes, with the
// azblob:// URL that reaches the same data through the Blob API (which
// works on accounts with a hierarchical namespace: Microsoft,
// "Multi-protocol access on Azure Data Lake Storage").
func ADLSURLError(rawURL string) error {
	u, err := url.Parse(rawURL)
	container, account := "<container>", "<account>"
	if err == nil && u.User != nil && u.User.Username() != "" {
		container = u.User.Username()
		account, _, _ = strings.Cut(u.Hostname(), ".")
	}
	path := ""
	if err == nil {
		path = strings.TrimPrefix(u.Path, "/")
	}
	return fmt.Errorf("delta: table %s: that is Spark's URL of an Azure storage account; here it is azblob://%s/%s with AZURE_STORAGE_ACCOUNT=%s through %s with the import _ %q", rawURL, container, path, account, OpenCall, "gocloud.dev/blob/azureblob")
}

// AllDrivers is the package that registers every cloud store's driver.
const AllDrivers = "github.com/cdcsnap/cdcsnap/sink/delta/alldrivers"

// OpenCall is the call that opens a table in a cloud store.
const OpenCall = "blobstore.Open (package github.com/cdcsnap/cdcsnap/sink/delta/blobstore)"

// DriverImport returns the package that registers gocloud.dev's driver
// of a URL scheme, "" for a scheme no driver of ours serves.
func DriverImport(scheme string) string {
	switch scheme {
	case "s3":
		return "gocloud.dev/blob/s3blob"
	case "gs":
		return "gocloud.dev/blob/gcsblob"
	case "azblob":
		return "gocloud.dev/blob/azureblob"
	}
	return ""
}

// IsADLS reports whether scheme is one of Spark's for Azure storage
// accounts, which ADLSURLError answers.
func IsADLS(scheme string) bool {
	switch scheme {
	case "abfss", "abfs", "wasbs", "wasb":
		return true
	}
	return false
}

// LocalOrMem says whether sink/delta's Open takes the table at rawURL
// itself: local for a folder (a plain path, "C:\..." on Windows, or
// file://), mem for mem://. u is rawURL parsed, nil when it does not parse
// (a path).
func LocalOrMem(rawURL string) (u *url.URL, local, mem bool) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, true, false
	}
	local = u.Scheme == "" || len(u.Scheme) == 1 || u.Scheme == "file"
	return u, local, u.Scheme == "mem"
}
