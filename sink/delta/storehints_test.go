package delta

import (
	"context"
	"strings"
	"testing"
)

// TestSparkADLSURLNamesTheAzblobURL: Spark's abfss:// (and wasbs://) URL
// of an Azure storage account, which no gocloud.dev driver takes, is
// answered with the azblob:// URL and account that reach the same table.
func TestSparkADLSURLNamesTheAzblobURL(t *testing.T) {
	for in, want := range map[string]string{
		"abfss://bronze@mylake.dfs.core.windows.net/sales/orders": "here it is azblob://bronze/sales/orders with AZURE_STORAGE_ACCOUNT=mylake",
		"wasbs://bronze@mylake.blob.core.windows.net/orders":      "here it is azblob://bronze/orders with AZURE_STORAGE_ACCOUNT=mylake",
	} {
		_, err := Open(context.Background(), in, Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s) = %v, want %q", in, err, want)
		}
	}
}
