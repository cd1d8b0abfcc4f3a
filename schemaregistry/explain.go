package schemaregistry

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Some registries (Apicurio's Confluent-compatible API) refuse a schema in a
// compatibility check without saying why. explainIncompatibility then names
// what the relay itself finds between the local schema and the subject's
// latest version: the record's full name, fields added or removed without
// a default, and field types that changed. It is a hint for the message;
// the verdict stays the registry's.

// compatDirection is the direction(s) a level checks: BACKWARD (the new
// schema reads the latest's data), FORWARD (the latest reads the new's), or
// both. A level the relay cannot tell (NONE reported by a registry that
// refused all the same, or unknown) is explained as BACKWARD, the
// registries' default.
func compatDirection(level string) (backward, forward bool, name string) {
	base := strings.TrimSuffix(strings.ToUpper(level), "_TRANSITIVE")
	switch base {
	case "FORWARD":
		return false, true, "FORWARD"
	case "FULL":
		return true, true, "FULL"
	}
	return true, false, "BACKWARD"
}

// avroField is a record field as the schema's JSON gives it.
type avroField struct {
	Name    string          `json:"name"`
	Type    json.RawMessage `json:"type"`
	Default json.RawMessage `json:"default"`
	Aliases []string        `json:"aliases"`
}

// recordFields returns the fields of a record schema text, false for any
// other schema.
func recordFields(text string) ([]avroField, bool) {
	var rec struct {
		Type   string      `json:"type"`
		Fields []avroField `json:"fields"`
	}
	if json.Unmarshal([]byte(text), &rec) != nil || rec.Type != "record" {
		return nil, false
	}
	return rec.Fields, true
}

// explainIncompatibility returns what makes local incompatible with latest
// under level ("" when the relay finds nothing it can name) and the
// direction it compared in.
func explainIncompatibility(local, latest, level string) (reason, direction string) {
	backward, forward, direction := compatDirection(level)
	if a, b := schemaFullName(local), schemaFullName(latest); a != b {
		return fmt.Sprintf("the local schema is named %s, the latest version %s: Avro resolves a record only under its own name (or an alias)", orNone(a), orNone(b)), direction
	}
	lf, lok := recordFields(local)
	rf, rok := recordFields(latest)
	if !lok || !rok {
		return "", direction
	}
	var found []string
	if backward {
		found = append(found, fieldDiffs(lf, rf, "new field %s has no default, so data written with the latest version cannot be read")...)
	}
	if forward {
		found = append(found, fieldDiffs(rf, lf, "field %s is removed and has no default in the latest version, so readers with it cannot read the new data")...)
	}
	for _, r := range lf {
		for _, w := range rf {
			if r.Name == w.Name && !sameType(r.Type, w.Type) {
				found = append(found, fmt.Sprintf("field %s changes type from %s to %s", r.Name, normalType(w.Type), normalType(r.Type)))
			}
		}
	}
	return strings.Join(found, "; "), direction
}

// fieldDiffs names each field of reader that writer lacks (by name or
// alias) and that has no default.
func fieldDiffs(reader, writer []avroField, format string) []string {
	has := map[string]bool{}
	for _, f := range writer {
		has[f.Name] = true
	}
	var out []string
next:
	for _, f := range reader {
		if has[f.Name] || len(f.Default) > 0 {
			continue
		}
		for _, a := range f.Aliases {
			if has[a] {
				continue next
			}
		}
		out = append(out, fmt.Sprintf(format, f.Name))
	}
	return out
}

// sameType compares two field types as compact JSON; a primitive named
// either way ("int" or {"type":"int"}) counts as the same.
func sameType(a, b json.RawMessage) bool {
	return normalType(a) == normalType(b)
}

func normalType(t json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(t, &m) == nil && len(m) == 1 {
		if inner, ok := m["type"]; ok {
			return compactJSON(inner)
		}
	}
	return compactJSON(t)
}

func compactJSON(b json.RawMessage) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func orNone(s string) string {
	if s == "" {
		return "(no name)"
	}
	return s
}

// Verdict words r's outcome for a message: "a new subject", "compatible
// under BACKWARD", "incompatible under BACKWARD", or "incompatible"
// followed by LevelPhrase's account of a NONE level.
func (r CompatResult) Verdict() string {
	switch {
	case r.Compatible && !r.Exists:
		return "a new subject"
	case r.Compatible:
		return "compatible under " + r.Level
	}
	return "incompatible " + r.LevelPhrase()
}

// LevelPhrase is "under LEVEL"; for a registry whose compatibility check
// refuses while it reports NONE (Apicurio Registry 3.x with no rule set),
// it says that instead of blaming NONE, and that the registry registers
// the change all the same (a registration under NONE is never refused).
func (r CompatResult) LevelPhrase() string {
	if strings.EqualFold(r.Level, "NONE") && !r.Compatible {
		return "by the registry's compatibility check, though the registry reports level NONE for the subject (under which it registers any change: run would register this one; set the subject's level to have it refused)"
	}
	return "under " + r.Level
}
