package config

import "time"

// A declared setting is a Go variable of one of the typed kinds below
// (PGURL, KafkaTLS, ...). Code reads a resolved value through it
// (config.PGURL.From(v)), so a misspelt setting does not compile, where a
// name looked up as text would panic at run time.

// StringSetting is a declared setting whose value is text.
type StringSetting struct{ *Setting }

// From returns the setting's resolved text in v.
func (s StringSetting) From(v *Values) string { return v.String(s.Name) }

// Items returns the setting's text in v as a comma-separated list (Values.List).
func (s StringSetting) Items(v *Values) []string { return v.List(s.Name) }

// BoolSetting is a declared true/false setting.
type BoolSetting struct{ *Setting }

// From reports whether the setting resolved to true in v.
func (s BoolSetting) From(v *Values) bool { return v.Bool(s.Name) }

// IntSetting is a declared whole-number setting.
type IntSetting struct{ *Setting }

// From returns the setting's resolved number in v.
func (s IntSetting) From(v *Values) int64 { return v.Int(s.Name) }

// DurationSetting is a declared duration setting.
type DurationSetting struct{ *Setting }

// From returns the setting's resolved duration in v.
func (s DurationSetting) From(v *Values) time.Duration { return v.Duration(s.Name) }

// ListSetting is a declared comma-separated setting.
type ListSetting struct{ *Setting }

// From returns the setting's items in v, trimmed, empty ones dropped.
func (s ListSetting) From(v *Values) []string { return v.List(s.Name) }

// Declared is any declared setting: what a Registry and a Command's
// Settings are built from.
type Declared interface{ setting() *Setting }

func (s *Setting) setting() *Setting { return s }

// Text returns the setting's resolved text in v, whatever its kind.
func (s *Setting) Text(v *Values) string { return v.String(s.Name) }

// SourceIn returns where the setting's value in v came from.
func (s *Setting) SourceIn(v *Values) Source { return v.Source(s.Name) }

// declared is every setting the constructors made, in order, so that a
// test finds one left out of its registry.
var declared []*Setting

func declare(s Setting, k Kind) *Setting {
	s.Kind = k
	declared = append(declared, &s)
	return &s
}

func newString(s Setting) StringSetting     { return StringSetting{declare(s, String)} }
func newBool(s Setting) BoolSetting         { return BoolSetting{declare(s, Bool)} }
func newInt(s Setting) IntSetting           { return IntSetting{declare(s, Int)} }
func newDuration(s Setting) DurationSetting { return DurationSetting{declare(s, Duration)} }
func newList(s Setting) ListSetting         { return ListSetting{declare(s, List)} }

// names returns the names of settings, for a Command's Settings and
// Required.
func names(settings ...Declared) []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = s.setting().Name
	}
	return out
}
