package main

// Schema evolution against the real registry: a compatible change registers
// a new version on restart and consumers holding the old schema still read
// the new events; each compatibility level refuses the changes it must, at
// startup, naming the subject, the level and the field.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/linkedin/goavro/v2"

	"github.com/cdc-relay/cdc-relay/internal/relaytest"
)

// evolutionDir holds the changed OrderCreated schemas (see its README).
func evolutionDir(change string) string {
	return filepath.Join(schemaDir, "evolution", change)
}

// schemasWith returns a schemas directory of testdata/schemas with
// OrderCreated.avsc taken from testdata/schemas/evolution/<change>.
func schemasWith(t *testing.T, change string) string {
	t.Helper()
	dir := t.TempDir()
	copySchemas(t, dir)
	b, err := os.ReadFile(filepath.Join(evolutionDir(change), "OrderCreated.avsc"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "OrderCreated.avsc"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// compactFile returns a schema file's JSON without insignificant space, as
// the relay registers it.
func compactFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestSchemaEvolutionCompatible: a new field with a default (in the middle
// of the record) and a new optional field register version 2 on restart;
// new events carry the new id; a consumer holding version 1 decodes them by
// Avro schema resolution (hamba/avro, writer schema fetched by id), and a
// consumer holding version 2 decodes the old events with the defaults.
// Against each registry.
func TestSchemaEvolutionCompatible(t *testing.T) {
	t.Parallel()
	eachRegistry(t, testSchemaEvolutionCompatible)
}

func testSchemaEvolutionCompatible(t *testing.T, reg relaytest.SchemaRegistry) {
	f := newFixtureFor(t, reg, "")
	c := consumeFast(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, f.args())
	r.waitStreaming(60 * time.Second)
	ctx := context.Background()
	conn := connect(t)
	agg := uuidFor(401)
	old, _ := f.insertRows(ctx, conn, []nrow{validRow(agg, 1)})
	c.waitIDs(60*time.Second, old)
	if code := r.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	subject := f.topic("Order") + "-com.example.orders.OrderCreated"
	if got := reg.Versions(t, subject); len(got) != 1 {
		t.Fatalf("versions of %s after the first run: %v", subject, got)
	}

	r2 := startRelay(t, withSchemasDir(f.args(), schemasWith(t, "compatible")))
	r2.waitStreaming(60 * time.Second)
	if got := reg.Versions(t, subject); len(got) != 2 {
		t.Fatalf("versions of %s after the restart with version 2: %v, want 2 versions", subject, got)
	}
	latestID := reg.LatestID(t, subject)

	withChannel := validRow(agg, 2)
	withChannel.Payload = sp(strings.Replace(orderCreated(agg, 2), `"customer_id": "c-2",`, `"customer_id": "c-2", "channel": "app", "gift_note": "für dich 🎁",`, 1))
	newIDs, _ := f.insertRows(ctx, conn, []nrow{withChannel, validRow(agg, 3)})
	recs := byID(c.waitIDs(60*time.Second, append(old, newIDs...)))
	if code := r2.terminate(); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	schemaID := func(id int64) int {
		v := recs[fmt.Sprint(id)].Value
		if len(v) < 5 || v[0] != 0 {
			t.Fatalf("event %d: not in the Confluent wire format", id)
		}
		return int(binary.BigEndian.Uint32(v[1:5]))
	}
	oldID := schemaID(old[0])
	for _, id := range newIDs {
		if got := schemaID(id); got != latestID || got == oldID {
			t.Fatalf("event %d carries schema id %d; want the new version's id %d (version 1 has %d)", id, got, latestID, oldID)
		}
	}

	// The writer's view (goavro, schema by id): the new fields are there.
	dec := f.avroDecoder()
	for i, want := range []struct{ channel, gift any }{{"app", map[string]any{"string": "für dich 🎁"}}, {"web", nil}} {
		got, _, err := dec.decode(recs[fmt.Sprint(newIDs[i])].Value)
		if err != nil {
			t.Fatal(err)
		}
		if got["channel"] != want.channel || fmt.Sprint(got["gift_note"]) != fmt.Sprint(want.gift) {
			t.Errorf("event %d as written: channel %v gift_note %v, want %v %v", newIDs[i], got["channel"], got["gift_note"], want.channel, want.gift)
		}
	}

	// A consumer holding version 1. The writer schema comes from the
	// registry by id (srclient); hamba/avro resolves it against the reader
	// schema (goavro has no reader/writer resolution).
	v1Text := compactFile(t, filepath.Join(schemaDir, "OrderCreated.avsc"))
	v2Text := compactFile(t, filepath.Join(evolutionDir("compatible"), "OrderCreated.avsc"))
	for i, id := range newIDs {
		value := recs[fmt.Sprint(id)].Value
		got := resolveDecode(t, v1Text, dec, value)
		if _, ok := got["channel"]; ok {
			t.Errorf("event %d read with version 1 has the new field: %v", id, got)
		}
		if got["customer_id"] != fmt.Sprintf("c-%d", i+2) || got["status"] != "PENDING" || got["amount_cents"] != int64(i+2) || got["currency"] != "EUR" {
			t.Errorf("event %d read with version 1: %v", id, got)
		}
		items, _ := got["items"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["sku"] != fmt.Sprintf("sku-%d", i+2) {
			t.Errorf("event %d read with version 1: items %v", id, got["items"])
		}
		// Without resolution, version 1 misreads the new bytes: the new
		// field sits in the middle. The resolution above is what works.
		codec, err := goavro.NewCodec(v1Text)
		if err != nil {
			t.Fatal(err)
		}
		if naive, rest, err := codec.NativeFromBinary(value[5:]); err == nil && len(rest) == 0 && fmt.Sprint(naive) == fmt.Sprint(got) {
			t.Errorf("event %d decodes with version 1 without resolution: the test does not exercise resolution", id)
		}
	}
	// A consumer holding version 2 reads the old event with the defaults.
	got := resolveDecode(t, v2Text, dec, recs[fmt.Sprint(old[0])].Value)
	if got["channel"] != "web" || got["gift_note"] != nil || got["customer_id"] != "c-1" {
		t.Errorf("old event read with version 2: %v", got)
	}
}

// resolveDecode decodes a Confluent-framed value with readerText, resolving
// against the writer schema the registry holds for the value's id.
func resolveDecode(t *testing.T, readerText string, dec *avroDecoder, value []byte) map[string]any {
	t.Helper()
	writerSchema, err := dec.client.GetSchema(int(binary.BigEndian.Uint32(value[1:5])))
	if err != nil {
		t.Fatal(err)
	}
	// Private caches: the two versions share their record names.
	reader, err := avro.ParseWithCache(readerText, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	writer, err := avro.ParseWithCache(writerSchema.Schema(), "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := avro.NewSchemaCompatibility().Resolve(reader, writer)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	var got map[string]any
	if err := avro.Unmarshal(resolved, value[5:], &got); err != nil {
		t.Fatalf("decode with the resolved schema: %v", err)
	}
	return got
}

// TestSchemaEvolutionLevels: with the subject's level set through PUT
// /config/{subject}, a change that level rejects stops the relay at startup
// (exit 2) with the subject, the level and the failing field, and registers
// nothing; a change the level allows starts. Against each registry.
func TestSchemaEvolutionLevels(t *testing.T) {
	t.Parallel()
	v1 := compactFile(t, filepath.Join(schemaDir, "OrderCreated.avsc"))
	eachRegistry(t, func(t *testing.T, reg relaytest.SchemaRegistry) { testSchemaEvolutionLevels(t, reg, v1) })
}

func testSchemaEvolutionLevels(t *testing.T, reg relaytest.SchemaRegistry, v1 string) {
	for _, tc := range []struct {
		level, change, field string
		accepted             bool
	}{
		{"BACKWARD", "add_required_field", "warehouse", false},
		{"FORWARD", "remove_required_field", "customer_id", false},
		{"FULL", "add_required_field", "warehouse", false},
		{"FULL", "remove_required_field", "customer_id", false},
		// FORWARD lets new fields without a default through: old readers skip them.
		{"FORWARD", "add_required_field", "warehouse", true},
	} {
		t.Run(tc.level+"/"+tc.change, func(t *testing.T) {
			t.Parallel()
			f := newFixtureFor(t, reg, "")
			subject := f.topic("Order") + "-com.example.orders.OrderCreated"
			reg.Register(t, subject, v1)
			reg.SetLevel(t, subject, tc.level)
			r := startRelay(t, withSchemasDir(f.args(), schemasWith(t, tc.change)))
			if tc.accepted {
				r.waitStreaming(60 * time.Second)
				if code := r.terminate(); code != 0 {
					t.Fatalf("exit code %d", code)
				}
				if got := reg.Versions(t, subject); len(got) != 2 {
					t.Fatalf("versions %v, want 2", got)
				}
				return
			}
			if code := r.wait(60 * time.Second); code != exitConfig {
				t.Fatalf("exit code = %d, want %d; output:\n%s", code, exitConfig, tailString(r.Output(), 3000))
			}
			out := r.Output()
			// AxonOps, as Confluent, names the field in its reason:
			// "reader field 'warehouse' has no default". Apicurio's
			// verbose check gives no reason, so the relay adds its own
			// after Apicurio's 409 message.
			why := []string{"'" + tc.field + "'"}
			if reg.Name() == "apicurio" {
				why = []string{"against the latest version (version 1), as a " + tc.level + " change: ", "field " + tc.field + " "}
			}
			for _, want := range append([]string{fmt.Sprintf("subject %q", subject), "under " + tc.level + " compatibility"}, why...) {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %s:\n%s", want, tailString(out, 3000))
				}
			}
			t.Logf("%s", firstLine(out, "refusing to start"))
			if got := reg.Versions(t, subject); len(got) != 1 {
				t.Fatalf("versions %v, want only version 1", got)
			}
		})
	}
}

// firstLine returns the first line of out containing s.
func firstLine(out, s string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
