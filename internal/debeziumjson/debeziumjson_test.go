package debeziumjson

import (
	"errors"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/cdc-relay/cdc-relay/internal/debeziumtest"
)

// java17 are the values.json payloads whose bytes come from Java 17's
// Double.toString, which is not the shortest form; AppendDouble follows
// Java 19+, whose output is given here.
var java17 = map[string]string{
	`{"f": 282879384806159000.0}`:       `{"f":2.82879384806159E17}`,
	`{"f": 100000000000000000000000.0}`: `{"f":1.0E23}`,
}

func fixtures(t *testing.T) *debeziumtest.Fixtures {
	t.Helper()
	f, err := debeziumtest.ReadFixtures("../../" + debeziumtest.FixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAppendPayloadFixtures: every payload Debezium wrote is reproduced
// byte for byte from its jsonb text; where Debezium wrote no record, or a
// non-object, AppendPayload returns an error.
func TestAppendPayloadFixtures(t *testing.T) {
	for _, v := range fixtures(t).Values {
		want, ok, err := debeziumtest.Bytes(v.Value)
		if err != nil {
			t.Fatal(err)
		}
		if j, ok := java17[v.Payload]; ok {
			want = []byte(j)
		}
		got, err := AppendPayload(nil, []byte(v.JSONB))
		isObject := len(v.JSONB) > 0 && v.JSONB[0] == '{'
		switch {
		case !isObject:
			if !errors.Is(err, ErrNotObject) {
				t.Errorf("payload %s: got %q, %v; want ErrNotObject", v.Payload, got, err)
			}
		case !ok:
			if !errors.Is(err, ErrUnconvertible) {
				t.Errorf("payload %s: Debezium wrote no record; got %q, %v; want ErrUnconvertible", v.Payload, got, err)
			}
		case err != nil:
			t.Errorf("payload %s: %v; Debezium wrote %s", v.Payload, err, want)
		case string(got) != string(want):
			t.Errorf("payload %s (jsonb %s):\n got %s\nwant %s", v.Payload, v.JSONB, got, want)
		}
	}
}

// TestAppendStringFixtures: the json keys of keys.json.
func TestAppendStringFixtures(t *testing.T) {
	for _, k := range fixtures(t).Keys {
		want, _, err := debeziumtest.Bytes(k.JSON)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, []byte(k.AggregateID)); string(got) != string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", k.AggregateID, got, want)
		}
	}
}

func TestAppendDouble(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{1.5, "1.5"}, {1, "1.0"}, {100, "100.0"}, {0.1, "0.1"}, {0.001, "0.001"}, {0.0001, "1.0E-4"},
		{1e7, "1.0E7"}, {9999999.5, "9999999.5"}, {12345678.5, "1.23456785E7"}, {1.5e-7, "1.5E-7"},
		{123456789012.25, "1.2345678901225E11"}, {1e23, "1.0E23"}, {-2.5, "-2.5"}, {0, "0.0"},
		{math.Copysign(0, -1), "-0.0"}, {math.MaxFloat64, "1.7976931348623157E308"}, {5e-324, "4.9E-324"},
		{math.Inf(1), "Infinity"}, {math.Inf(-1), "-Infinity"}, {math.NaN(), "NaN"}, {0.00123, "0.00123"},
		{1234567.0, "1234567.0"}, {3.141592653589793, "3.141592653589793"},
	} {
		if got := string(AppendDouble(nil, c.f)); got != c.want {
			t.Errorf("AppendDouble(%v) = %s, want %s", c.f, got, c.want)
		}
	}
}

func TestAppendStringEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"a\x00b":      `"a\u0000b"`,
		"\x1f\x7f":    "\"\\u001F\x7f\"",
		"\u2028</>&":  "\"\u2028</>&\"",
		"😀":           `"\uD83D\uDE00"`,
		"\xff":        "\"\uFFFD\"",
		"\b\f\r\t\n":  `"\b\f\r\t\n"`,
		`quote"back\`: `"quote\"back\\"`,
		"\U0010FFFF":  `"\uDBFF\uDFFF"`,
		"Заказ №7":    `"Заказ №7"`,
	} {
		if got := string(AppendString(nil, []byte(in))); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzAppendPayload: any input either fails or gives valid JSON.
func FuzzAppendPayload(f *testing.F) {
	f.Add([]byte(`{"a": [{"b": 1}, {"c": null}], "d": 1.5}`))
	f.Add([]byte(`{"x": [1, "a"]}`))
	f.Add([]byte(`{"x": [{"a": 007}]}`))
	f.Add([]byte("{\"x\": [{\"a\": \"\xff\"}, {\"b\": \"\\ud800\"}]}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := AppendPayload(nil, b)
		if err != nil {
			return
		}
		if !jsonValid(b) || !utf8.Valid(b) {
			t.Fatalf("AppendPayload accepted %q, which is not valid JSON", b)
		}
		if !jsonValid(out) {
			t.Fatalf("AppendPayload(%q) = %q, not valid JSON", b, out)
		}
	})
}
