package objstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/cdcsnap/cdcsnap/internal/testenv"
)

// AzuriteVersion is the npm package StartAzure installs.
const AzuriteVersion = "3.37.0"

// azureAccount and azureKey are Azurite's well-known development account
// (documented by Microsoft for the emulator; not a secret).
const (
	azureAccount = "devstoreaccount1"
	azureKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// StartAzure starts Azurite's blob service (npm azurite, installed on first
// use into .cache/azurite-<version> of the repository) on a free loopback
// port with its data in dir, and makes container Bucket.
//
// gocloud.dev v0.49.0 reaches it with azblob://lake/path?localemu=true&
// protocol=http&domain=127.0.0.1:PORT (blob/azureblob/azureblob.go:
// withOverrides reads localemu, protocol, domain; NewServiceURL then
// builds http://127.0.0.1:PORT/devstoreaccount1 and accepts only a
// loopback domain), with the shared key from AZURE_STORAGE_ACCOUNT and
// AZURE_STORAGE_KEY (newCredInfoFromEnv). IfNotExist becomes
// If-None-Match: * on the upload (NewTypedWriter sets
// ModifiedAccessConditions.IfNoneMatch = azcore.ETagAny).
func StartAzure(ctx context.Context, dir string) (*Store, error) {
	bin, err := installAzurite(ctx)
	if err != nil {
		return nil, err
	}
	// --skipApiVersionCheck: the Go SDK may send a newer x-ms-version
	// than Azurite 3.37.0 knows. --disableTelemetry: no network.
	p, port, err := startServer(ctx, bin, func(port int) []string {
		return []string{"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port),
			"--location", dir, "--silent", "--skipApiVersionCheck", "--disableTelemetry"}
	}, "/", 60*time.Second)
	if err != nil {
		return nil, err
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := createContainer(ctx, endpoint); err != nil {
		_ = p.kill()
		return nil, err
	}
	s := &Store{Kind: "azure", Endpoint: endpoint, stop: p.kill}
	s.urlOf = func(hostport, table string) string {
		return "azblob://" + Bucket + "/" + strings.Trim(table, "/") + "?domain=" + hostport + "&localemu=true&protocol=http"
	}
	s.env = func(string) []string {
		return []string{
			"AZURE_STORAGE_ACCOUNT=" + azureAccount,
			"AZURE_STORAGE_KEY=" + azureKey,
			"AZURE_STORAGE_CONNECTION_STRING=",
			"AZURE_STORAGEBLOB_CONNECTIONSTRING=",
			"AZURE_STORAGE_SAS_TOKEN=",
		}
	}
	s.rsURI = func(table string) string { return "az://" + Bucket + "/" + strings.Trim(table, "/") }
	s.rsOpts = func() map[string]string {
		// object_store's AzureConfigKey: with use_emulator the account
		// URL is AZURITE_BLOB_STORAGE_URL (default 127.0.0.1:10000), see
		// DeltaRSEnv; the key is the emulator's well-known one.
		return map[string]string{
			"azure_storage_use_emulator": "true",
			"azure_storage_account_name": azureAccount,
			"azure_storage_account_key":  azureKey,
			"azure_allow_http":           "true",
		}
	}
	s.rsEnv = func() []string { return []string{"AZURITE_BLOB_STORAGE_URL=" + endpoint} }
	return s, nil
}

func createContainer(ctx context.Context, endpoint string) error {
	cred, err := azblob.NewSharedKeyCredential(azureAccount, azureKey)
	if err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	c, err := container.NewClientWithSharedKeyCredential(endpoint+"/"+azureAccount+"/"+Bucket, cred, nil)
	if err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	if _, err := c.Create(ctx, nil); err != nil {
		return fmt.Errorf("objstore: creating container %s: %w", Bucket, err)
	}
	return nil
}

// installAzurite installs azurite@AzuriteVersion into the repository's
// .cache/azurite-<version> unless it is there, and returns the path of its
// azurite-blob. It installs into a temporary folder renamed into place, so
// concurrent installs (two test packages) are safe.
func installAzurite(ctx context.Context) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".cache", "azurite-"+AzuriteVersion)
	bin := filepath.Join(dir, "node_modules", ".bin", "azurite-blob")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	npm, err := testenv.NPM.Find()
	if err != nil {
		return "", fmt.Errorf("%w: Azurite is an npm package: %w", ErrUnavailable, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o777); err != nil {
		return "", fmt.Errorf("objstore: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".azurite-install-")
	if err != nil {
		return "", fmt.Errorf("objstore: %w", err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--silent", "azurite@"+AzuriteVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnavailable, testenv.Offline("Azurite", "the npm registry", "npm install azurite@"+AzuriteVersion, fmt.Sprintf("%v\n%s", err, lastLines(string(out), 5))))
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(bin); serr == nil {
			return bin, nil // another install won
		}
		return "", fmt.Errorf("objstore: %w", err)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", errors.New("objstore: npm installed azurite but " + bin + " is missing")
	}
	return bin, nil
}
