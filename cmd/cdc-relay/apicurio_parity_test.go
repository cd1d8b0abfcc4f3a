package main

// docs/MIGRATING.md section 3, against a real Debezium with a real Avro
// converter: Apicurio's (Confluent's is not on Maven Central), writing
// Confluent's framing into an Apicurio registry, next to the relay writing
// through the same registry's Confluent-compatible API.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/linkedin/goavro/v2"
	"github.com/riferrei/srclient"

	"github.com/cdc-relay/cdc-relay/internal/debeziumtest"
	"github.com/cdc-relay/cdc-relay/internal/registrytest"
)

// TestDebeziumApicurioParity writes the same OrderCreated rows through
// Debezium 3.6.1 with Apicurio's AvroConverter 2.6.13 (as-confluent, no
// id headers) and through the relay (--value-format avro, the default
// subject strategy), both into one Apicurio Registry 3.3.3, and compares
// per id header what docs/MIGRATING.md says: the same key bytes and
// partition; both values in Confluent's framing, each id resolvable
// through the Confluent-compatible API; Debezium's under <topic>-value
// with the inferred record "payload", the relay's under
// <topic>-com.example.orders.OrderCreated; and the same data when an
// independent client (srclient and goavro) decodes each with its writer
// schema.
func TestDebeziumApicurioParity(t *testing.T) {
	t.Parallel()
	ap := apicurio.Need(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Apicurio log (tail):\n%s", tailString(readFile(ap.LogPath()), 3000))
		}
	})
	convLibs, err := debeziumtest.ApicurioConverterDir()
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "")
	f.exec(fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE public.%s WITH (publish = 'insert')", f.publication, f.table))
	dSlot, rSlot := f.slot+"_da", f.slot+"_ra"
	createSlots(t, f, dSlot, rSlot)
	dPrefix, rPrefix := "da"+f.name, "ra"+f.name
	conn := connect(t)
	ctx := context.Background()
	var ids []string
	for i := 1; i <= 6; i++ {
		agg := fmt.Sprintf("order-%d", i%3)
		got, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(uuidFor(i), 1000+i)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, strconv.FormatInt(got[0], 10))
	}

	reader := readTopics(t, `^(da|ra)`+f.name+`\.`)
	w, err := debeziumtest.Start(debeziumtest.WorkerOptions{Broker: broker.Addr(), OffsetFlushInterval: dbzFlush, ExtraLibs: []string{convLibs}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Connect log (tail):\n%s", w.Output(60))
		}
		w.Close()
	})
	dc := dbzConnector(f, "apicurio-"+f.name, dSlot, f.publication, dPrefix, debeziumtest.StringConverter)
	dc.PublicationAutocreate = "disabled"
	dc.ValueConverter = debeziumtest.DefaultConverter
	dc.Extra = [][2]string{
		{"value.converter", "io.apicurio.registry.utils.converter.AvroConverter"},
		{"value.converter.apicurio.registry.url", ap.RegistryV2URL()},
		{"value.converter.apicurio.registry.auto-register", "true"},
		{"value.converter.apicurio.registry.find-latest", "true"},
		{"value.converter.apicurio.registry.as-confluent", "true"},
		{"value.converter.apicurio.registry.headers.enabled", "false"},
		{"value.converter.apicurio.registry.use-id", "contentId"},
	}
	if err := w.AddConnector(ctx, dc); err != nil {
		t.Fatal(err)
	}
	args := f.args("--slot", rSlot, "--topic-template", rPrefix+".{aggregate_type}", "--key-format", "string", "--builtin-headers", "id")
	setFlag(args, "--schema-registry-url", ap.URL())
	r := startRelay(t, args)

	var recs []debeziumtest.Record
	waitFor(t, dbzWait, "every row from Debezium and the relay", func() bool {
		if err := w.Check(ctx, dc.Name); err != nil {
			t.Fatal(err)
		}
		failIfExited(t, r)
		recs = reader.Records()
		return hasAll(recordsByID(recs, dPrefix), ids) && hasAll(recordsByID(recs, rPrefix), ids)
	})
	d, rl := recordsByID(recs, dPrefix), recordsByID(recs, rPrefix)
	sr := srclient.NewSchemaRegistryClient(ap.URL())
	dTopic, rTopic := dPrefix+".Order", rPrefix+".Order"
	for _, id := range ids {
		if len(d[id]) != 1 || len(rl[id]) != 1 {
			t.Errorf("id %s: %d records from Debezium, %d from the relay, want 1 each", id, len(d[id]), len(rl[id]))
			continue
		}
		dr, rr := d[id][0], rl[id][0]
		if !bytes.Equal(dr.Key, rr.Key) || dr.Partition != rr.Partition {
			t.Errorf("id %s: key %q partition %d, Debezium's %q partition %d", id, rr.Key, rr.Partition, dr.Key, dr.Partition)
		}
		dJSON, dSubject, dName := decodeStandard(t, sr, ap, "Debezium's", dr.Value)
		rJSON, rSubject, rName := decodeStandard(t, sr, ap, "the relay's", rr.Value)
		if dSubject != dTopic+"-value" || dName != "payload" {
			t.Errorf("id %s: Debezium's schema is %q under %q, want payload under %s-value", id, dName, dSubject, dTopic)
		}
		if want := rTopic + "-com.example.orders.OrderCreated"; rSubject != want || rName != "com.example.orders.OrderCreated" {
			t.Errorf("id %s: the relay's schema is %q under %q, want com.example.orders.OrderCreated under %s", id, rName, rSubject, want)
		}
		if id == ids[0] {
			t.Logf("id %s: Debezium's schema id %d (%s), the relay's %d (%s); both decode to %s", id,
				binary.BigEndian.Uint32(dr.Value[1:5]), dSubject, binary.BigEndian.Uint32(rr.Value[1:5]), rSubject, rJSON)
		}
		if dJSON != rJSON {
			t.Errorf("id %s: the relay's value decodes to\n%s\nDebezium's to\n%s", id, rJSON, dJSON)
		}
	}
}

// decodeStandard checks value's Confluent framing, resolves its id through
// the Confluent-compatible API and decodes it to plain JSON (unions
// unwrapped, null members left out, sorted keys), returning the JSON, the
// id's subject and the writer schema's record name.
func decodeStandard(t *testing.T, sr *srclient.SchemaRegistryClient, ap *registrytest.Apicurio, who string, value []byte) (text, subject, name string) {
	t.Helper()
	if len(value) < 5 || value[0] != 0 {
		t.Fatalf("%s value is not in the Confluent wire format: % x", who, value[:min(len(value), 8)])
	}
	id := int(binary.BigEndian.Uint32(value[1:5]))
	s, err := sr.GetSchema(id)
	if err != nil {
		t.Fatalf("%s schema id %d: %v", who, id, err)
	}
	codec, err := goavro.NewCodecForStandardJSONFull(s.Schema())
	if err != nil {
		t.Fatalf("%s schema %d: %v", who, id, err)
	}
	native, rest, err := codec.NativeFromBinary(value[5:])
	if err != nil || len(rest) != 0 {
		t.Fatalf("%s value: %v (%d bytes left)", who, err, len(rest))
	}
	js, err := codec.TextualFromNative(nil, native)
	if err != nil {
		t.Fatalf("%s value to JSON: %v", who, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s JSON %s: %v", who, js, err)
	}
	var versions []struct {
		Subject string `json:"subject"`
	}
	res, err := http.Get(ap.URL() + "/schemas/ids/" + strconv.Itoa(id) + "/versions")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&versions); err != nil || len(versions) == 0 {
		t.Fatalf("%s schema id %d: subjects %v, %v", who, id, versions, err)
	}
	return canonicalJSON(t, dropNulls(v)), versions[0].Subject, schemaName(s.Schema())
}

// dropNulls leaves out null members at every depth (Debezium's inferred
// schema has every field optional; a JSON payload without a member and
// one with it null read the same).
func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, inner := range x {
			if inner != nil {
				m[k] = dropNulls(inner)
			}
		}
		return m
	case []any:
		for i := range x {
			x[i] = dropNulls(x[i])
		}
	}
	return v
}

// schemaName is a record schema's full name.
func schemaName(text string) string {
	var s struct{ Name, Namespace string }
	json.Unmarshal([]byte(text), &s)
	if s.Namespace != "" && !strings.Contains(s.Name, ".") {
		return s.Namespace + "." + s.Name
	}
	return s.Name
}

// readFile is a file's text, or the error's.
func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
