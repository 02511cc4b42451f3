package lsn_test

import (
	"encoding/json"
	"fmt"

	"github.com/cdcsnap/cdcsnap/lsn"
)

func Example() {
	// The transaction log's colon form, as DBCC and fn_dblog print it.
	l, err := lsn.Parse("0000002a:00000f38:ffff")
	if err != nil {
		fmt.Println(err)
		return
	}
	next, _ := l.Next() // sys.fn_cdc_increment_lsn: carries into the block
	fmt.Println(l, next, l.Less(next))

	js, _ := json.Marshal(map[string]lsn.LSN{"lsn": next})
	fmt.Println(string(js))

	_, err = lsn.Parse("0x2A")
	fmt.Println(err)
	// Output:
	// 0x0000002A00000F38FFFF 0x0000002A00000F390000 true
	// {"lsn":"0x0000002A00000F390000"}
	// lsn: cannot parse "0x2A": want 20 hex digits, have 2 bytes
}
