package main

import (
	"context"
	"fmt"
	"io"

	"github.com/cdcsnap/cdcsnap/fake"
	"github.com/cdcsnap/cdcsnap/lsn"
	"github.com/cdcsnap/cdcsnap/sink/delta"
	"github.com/cdcsnap/cdcsnap/snapshot"
	"github.com/cdcsnap/cdcsnap/source"
)

// switchStream moves the table's stream from cfg.instance, read up to
// next, to the newer capture instance cfg.switchTo at its start_lsn
// (snapshot.Switch) and streams the new instance's changes once. batch is
// the stream batch of the old instance's last changes. On the demo it
// first does what a schema change does on SQL Server: a column added to
// the table, the new capture instance enabled, a row updated.
func switchStream(ctx context.Context, cfg config, src source.Source, table *delta.Table, demo *demoDB, next lsn.LSN, batch int64, stdout io.Writer) error {
	if demo != nil {
		if err := demo.schemaChange(cfg.switchTo); err != nil {
			return err
		}
	}
	res, err := snapshot.Switch(ctx, src, table, next, snapshot.SwitchOptions{From: cfg.instance, To: cfg.switchTo, BatchID: batch})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "switch:   %s read below %s (%d change rows), %s from its start_lsn %s on\n", res.From, res.At, res.Last.Rows, res.To, res.At)
	p, err := snapshot.Poll(ctx, src, table, res.To, res.Next, snapshot.PollOptions{BatchID: 1})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stream:   %d change rows of %s appended; next LSN to read: %s (disable %s once the stream has passed %s)\n", p.Rows, res.To, p.Next, res.From, res.At)
	return nil
}

// schemaChange adds a column to the demo table, enables a second capture
// instance that captures it, and updates a row's new column.
func (d *demoDB) schemaChange(instance string) error {
	if _, err := d.db.AddColumn("sales", "orders", fake.ColumnDef{Name: "note", Type: "nvarchar(40)", Nullable: true}); err != nil {
		return err
	}
	if _, err := d.db.EnableCDC("sales", "orders", instance); err != nil {
		return err
	}
	var key []any
	var row fake.Row
	for id := 1; row == nil && id <= len(d.regionOf); id++ {
		key = []any{demoRegions[d.regionOf[id-1]], int64(id)}
		r, ok, err := d.db.Get("sales", "orders", key)
		if err != nil {
			return err
		}
		if ok {
			row = r
		}
	}
	if row == nil {
		return fmt.Errorf("demo: no order to update")
	}
	row[len(row)-1] = "added after the schema change"
	tx := d.db.Begin()
	if err := tx.Update("sales", "orders", key, row); err != nil {
		return err
	}
	_, err := tx.Commit()
	return err
}
