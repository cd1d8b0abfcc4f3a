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

// BoolAction is a declared true/false action flag (--dry-run): commands
// take it through With, and code reads it through From.
type BoolAction struct{ name string }

// Name is the flag's name, without dashes.
func (a BoolAction) Name() string { return a.name }

// With is the flag as a Command's action, with its --help text there.
func (a BoolAction) With(help string) Action { return Action{Name: a.name, Bool: true, Help: help} }

// From reports whether the flag is true in v.
func (a BoolAction) From(v *Values) bool { return v.ActionBool(a.name) }

// Given reports whether the flag was given at all (--follow false is).
func (a BoolAction) Given(v *Values) bool { _, given := v.Action(a.name); return given }

// TextAction is a declared action flag that takes a value (--since TIME).
type TextAction struct{ name, arg string }

// Name is the flag's name, without dashes.
func (a TextAction) Name() string { return a.name }

// With is the flag as a Command's action, with its --help text there.
func (a TextAction) With(help string) Action { return Action{Name: a.name, Arg: a.arg, Help: help} }

// From returns the flag's value in v and whether it was given.
func (a TextAction) From(v *Values) (string, bool) { return v.Action(a.name) }

// The action flags: the command line only, never env or YAML. A command
// lists the ones it takes in its Actions.
var (
	FlagJSON          = BoolAction{"json"}
	FlagDryRun        = BoolAction{"dry-run"}
	FlagAcceptGap     = BoolAction{"accept-gap"}
	FlagFromBeginning = BoolAction{"from-beginning"}
	FlagFollow        = BoolAction{"follow"}
	FlagPretty        = BoolAction{"pretty"}
	FlagSince         = TextAction{"since", "TIME"}
	FlagUntil         = TextAction{"until", "TIME"}
	FlagFromID        = TextAction{"from-id", "ID"}
	FlagToID          = TextAction{"to-id", "ID"}
	FlagReason        = TextAction{"reason", "TEXT"}
	FlagOffset        = TextAction{"offset", "P:O[,P:O...]"}
	FlagCount         = TextAction{"count", "N"}
	FlagID            = TextAction{"id", "ID"}
	FlagEventType     = TextAction{"event-type", "TYPE"}
	FlagKind          = TextAction{"kind", "KIND"}
	FlagPattern       = TextAction{"pattern", "PATTERN"}
)

// Names lists the registry names of settings.
func Names(settings ...StringSetting) []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = s.Name
	}
	return out
}
