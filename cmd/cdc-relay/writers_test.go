package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// runWriters runs writers goroutines at once, each on a connection of its
// own, until each has committed perWriter events, and fails the test on
// an error once all have returned. next(w, done) is writer w's next
// transaction, done the events it has committed so far; runWriters cuts it
// to what is left of perWriter. committed(w, evs, ids, began) records a
// committed transaction (its events, their ids, when its insert began),
// one call at a time.
func (f *fixture) runWriters(writers, perWriter int, next func(w, done int) []event, committed func(w int, evs []event, ids []int64, began time.Time)) {
	f.t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, f.pg.url)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			for done := 0; done < perWriter; {
				evs := next(w, done)
				if len(evs) == 0 {
					errs <- fmt.Errorf("writer %d: an empty transaction after %d events", w, done)
					return
				}
				evs = evs[:min(len(evs), perWriter-done)]
				began := time.Now()
				ids, err := f.insertTx(ctx, conn, evs)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				committed(w, evs, ids, began)
				mu.Unlock()
				done += len(evs)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		f.t.Fatal(err)
	}
}
