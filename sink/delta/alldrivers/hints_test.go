package alldrivers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/sink/delta/blobstore"
)

// noCloudSetup clears what the SDKs read for region, account and
// credentials, and points HOME at an empty folder (no ~/.aws, no gcloud
// credentials), so each store fails as on a machine never set up for it.
func noCloudSetup(t *testing.T) {
	for _, name := range []string{
		"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN",
		"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING", "GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST",
		"CLOUDSDK_CONFIG",
	} {
		t.Setenv(name, "")
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true") // no instance role either
}

// TestStoreErrorsSayWhatFixesThem opens a table on each cloud with nothing
// set up, as a first day does, and reads its version: the error starts
// with what fixes it (a region, an account name, credentials) and keeps
// the SDK's own message after it. No request leaves the machine: each
// fails before its first one (the S3 URL with credentials names a closed
// loopback port in case).
func TestStoreErrorsSayWhatFixesThem(t *testing.T) {
	for _, tc := range []struct {
		url, hint, sdk string
	}{
		{"s3://my-lake/bronze/orders", "S3 needs a region: add region=<region> to the URL", "Invalid region: region was not a valid DNS name"},
		{"s3://my-lake/bronze/orders?region=eu-west-1&endpoint=http://127.0.0.1:1", "S3 found no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", "failed to refresh cached credentials"},
		{"azblob://bronze/orders", "Azure needs the storage account: set AZURE_STORAGE_ACCOUNT", "Options.AccountName is required"},
		{"gs://my-lake/bronze/orders", "GCS found no usable credentials: set GOOGLE_APPLICATION_CREDENTIALS", "private key should be a PEM"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			noCloudSetup(t)
			tb, err := blobstore.Open(context.Background(), tc.url, delta.Options{})
			if err == nil {
				_, err = tb.Version(context.Background())
				tb.Close()
			}
			want := "delta: table " + tc.url + ": " + tc.hint
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.sdk) {
				t.Fatalf("got %v\nwant it to start with %q and keep %q", err, want, tc.sdk)
			}
		})
	}
}
