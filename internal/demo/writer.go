package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The payloads below follow testdata/schemas/OrderCreated.avsc and
// OrderCancelled.avsc: order_id is a uuid, amounts are longs, timestamps are
// timestamp-millis numbers, status and reason are enum symbols.

// lineItem is one entry of OrderCreated.items.
type lineItem struct {
	SKU            string `json:"sku"`
	Quantity       int    `json:"quantity"`
	UnitPriceCents int64  `json:"unit_price_cents"`
}

// orderCreated is the OrderCreated payload.
type orderCreated struct {
	OrderID     string     `json:"order_id"`
	CustomerID  string     `json:"customer_id"`
	Status      string     `json:"status"`
	AmountCents any        `json:"amount_cents"` // an int64, except in the invalid event
	Currency    string     `json:"currency"`
	Items       []lineItem `json:"items"`
	CouponCode  *string    `json:"coupon_code"`
	CreatedAt   int64      `json:"created_at"`
}

// orderCancelled is the OrderCancelled payload.
type orderCancelled struct {
	OrderID     string  `json:"order_id"`
	CustomerID  string  `json:"customer_id"`
	Reason      string  `json:"reason"`
	AmountCents int64   `json:"amount_cents"`
	Currency    string  `json:"currency"`
	Comment     *string `json:"comment"`
	CancelledAt int64   `json:"cancelled_at"`
}

// order is one of the demo's aggregates.
type order struct {
	id       string // uuid: the aggregate id and the Kafka key
	customer string
	items    []lineItem
}

// written is one outbox row the writer committed.
type written struct {
	id          string // the uuid the table's default gave it
	aggregateID string
	eventType   string
	valid       bool // false for the event meant for the dead-letter topic
}

// txSize is how many events each transaction holds: one per order.
const txSize = 3

// invalidEvent is the kind of invalid event the writer adds last.
type invalidEvent int

const (
	// badAmount is an OrderCreated whose amount_cents is a string, which
	// the Avro schema refuses.
	badAmount invalidEvent = iota
	// badJSON is an OrderCreated whose payload is a JSON array, which
	// --value-format json refuses (a value is a JSON object).
	badJSON
)

// writeEvents inserts n valid events for 3 orders, txSize per transaction,
// alternating rounds of OrderCreated and OrderCancelled, then one invalid
// OrderCreated (see invalidEvent) in a transaction of its own. It prints a
// line per transaction and returns the rows and the WAL position after the
// last commit.
func writeEvents(ctx context.Context, conn *pgx.Conn, n int, invalid invalidEvent) ([]written, string, error) {
	coupon, comment := "WELCOME10", "customer changed their mind"
	orders := []order{
		{newUUID(), "cust-0001", []lineItem{{"SKU-TEA-001", 2, 450}, {"SKU-MUG-002", 1, 1099}}},
		{newUUID(), "cust-0002", []lineItem{{"SKU-BOOK-117", 1, 2499}}},
		{newUUID(), "cust-0003", []lineItem{{"SKU-SOCK-009", 3, 399}}},
	}
	var all []written
	for start := 0; start < n; start += txSize {
		var rows []row
		for i := start; i < min(start+txSize, n); i++ {
			o := orders[i%len(orders)]
			now := time.Now().UnixMilli()
			if (i/len(orders))%2 == 0 {
				p := orderCreated{OrderID: o.id, CustomerID: o.customer, Status: "PENDING", AmountCents: o.total(),
					Currency: "EUR", Items: o.items, CreatedAt: now}
				if i%len(orders) == 0 {
					p.CouponCode = &coupon
				}
				rows = append(rows, row{o.id, "OrderCreated", p, true})
			} else {
				p := orderCancelled{OrderID: o.id, CustomerID: o.customer, Reason: "CUSTOMER_REQUEST", AmountCents: o.total(),
					Currency: "EUR", CancelledAt: now}
				if i%len(orders) == 1 {
					p.Reason, p.Comment = "OUT_OF_STOCK", &comment
				}
				rows = append(rows, row{o.id, "OrderCancelled", p, true})
			}
		}
		w, err := insertTx(ctx, conn, rows)
		if err != nil {
			return nil, "", err
		}
		all = append(all, w...)
	}
	// The invalid event, which the relay refuses to encode and sends to the
	// dead-letter topic (or stream) instead.
	o := orders[0]
	var bad any = orderCreated{OrderID: o.id, CustomerID: o.customer, Status: "PENDING", AmountCents: "12",
		Currency: "EUR", Items: o.items, CreatedAt: time.Now().UnixMilli()}
	if invalid == badJSON {
		bad = []string{o.id, "PENDING"}
	}
	w, err := insertTx(ctx, conn, []row{{o.id, "OrderCreated", bad, false}})
	if err != nil {
		return nil, "", err
	}
	all = append(all, w...)

	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return nil, "", fmt.Errorf("read WAL position: %w", err)
	}
	return all, lsn, nil
}

// row is one event to insert.
type row struct {
	aggregateID string
	eventType   string
	payload     any // marshalled to JSON
	valid       bool
}

// insertTx inserts rows in one transaction, all with the same trace id in
// their traceparent header, and prints one line for the commit.
func insertTx(ctx context.Context, conn *pgx.Conn, rows []row) ([]written, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) // does nothing after Commit
	traceID := randomHex(16)
	out := make([]written, len(rows))
	for i, r := range rows {
		payload, err := json.Marshal(r.payload)
		if err != nil {
			return nil, err
		}
		headers, err := json.Marshal(map[string]string{
			"traceparent": "00-" + traceID + "-" + randomHex(8) + "-01",
			"source":      "cdc-relay-demo",
		})
		if err != nil {
			return nil, err
		}
		out[i] = written{aggregateID: r.aggregateID, eventType: r.eventType, valid: r.valid}
		if err := tx.QueryRow(ctx, `INSERT INTO public.outbox (aggregate_type, aggregate_id, event_type, payload, headers)
			VALUES ('Order', $1, $2, $3::jsonb, $4::jsonb) RETURNING id::text`,
			r.aggregateID, r.eventType, string(payload), string(headers)).Scan(&out[i].id); err != nil {
			return nil, fmt.Errorf("insert %s: %w", r.eventType, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	note := ""
	if !rows[0].valid {
		note = "  (invalid on purpose: amount_cents is a string)"
		if _, array := rows[0].payload.([]string); array {
			note = "  (invalid on purpose: the payload is a JSON array, not an object)"
		}
	}
	ids := fmt.Sprintf("ids %s..%s", out[0].id[:8], out[len(out)-1].id[:8])
	if len(out) == 1 {
		ids = "id " + out[0].id[:8]
	}
	fmt.Printf("writer      committed %s: %s x%d, trace %s%s\n", ids, rows[0].eventType, len(rows), traceID, note)
	return out, nil
}

// total is the order's amount in cents.
func (o order) total() int64 {
	var sum int64
	for _, it := range o.items {
		sum += int64(it.Quantity) * it.UnitPriceCents
	}
	return sum
}

// newUUID returns a random (version 4) UUID in its 8-4-4-4-12 text form.
func newUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
