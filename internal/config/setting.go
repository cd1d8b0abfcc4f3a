package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is the type of a setting's value.
type Kind int

// The kinds. Every value is resolved as text (a flag, an env var, a YAML
// scalar) and parsed by its kind, so that the same rules hold whatever set it.
const (
	String   Kind = iota // any text; Check and Choices narrow it
	Bool                 // true or false; a bare --flag means true
	Int                  // a whole number of at least Min
	Duration             // a Go duration between Min and Max
	List                 // comma-separated; the flag may be repeated, YAML takes a list
)

// Setting is one configuration key, declared once.
type Setting struct {
	// Name is the flag name (--name), in kebab-case; the env name and the
	// YAML key follow from it.
	Name string
	Kind Kind
	// Default is the value when neither flag, env nor YAML sets it.
	Default string
	// Help is one sentence for --help.
	Help string
	// Arg names the value in --help (URL, NAME, FILE); default by kind.
	Arg string
	// Choices, when set, are the only values allowed.
	Choices []string
	// Min and Max bound an Int (Min only) or a Duration (both).
	Min, Max int64
	// Check validates the resolved text; its error is the message after
	// "--name: ". Nil: only the kind is checked.
	Check func(v string) error
	// NoYAML keeps the setting out of the YAML file (--config itself).
	NoYAML bool
	// Entry is the shape of a YAML list entry that is a mapping (a table
	// entry {name: ..., columns: {...}}); its NameKey's value joins the list.
	Entry *Shape
	// NameKey is the key of Entry that holds the entry's value.
	NameKey string

	// Doc is the setting's meaning in docs/CONFIGURATION.md's settings
	// table (Markdown), when it says more than Help.
	Doc string
	// DocDefault is the table's default column when the default is not
	// Default itself (a value the relay derives, "required for Avro").
	DocDefault string
	// DocJoin puts the setting in the table row of the one declared
	// before it, whose Doc speaks for both.
	DocJoin bool
}

// Env is the setting's environment variable: CDC_RELAY_<NAME_IN_UPPER_SNAKE>.
// CDC_RELAY_<NAME>_FILE names a file holding the value.
func (s *Setting) Env() string { return EnvName(s.Name) }

// EnvName is the environment variable of a setting name.
func EnvName(name string) string {
	return "CDC_RELAY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// validate checks v against the setting's kind, choices and Check.
func (s *Setting) validate(v string) error {
	switch s.Kind {
	case Bool:
		if v != "true" && v != "false" {
			return errorf(s.Name, "%q is not true or false", v)
		}
	case Int:
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < s.Min {
			return errorf(s.Name, "%q is not a whole number of at least %d", v, s.Min)
		}
	case Duration:
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Duration(s.Min) || d > time.Duration(s.Max) {
			return errorf(s.Name, "%q is not a duration between %s and %s, e.g. 1s", v, time.Duration(s.Min), time.Duration(s.Max))
		}
	}
	if len(s.Choices) > 0 && !contains(s.Choices, v) {
		return errorf(s.Name, "%q is not %s", v, orList(s.Choices))
	}
	if s.Check != nil {
		if err := s.Check(v); err != nil {
			return errorf(s.Name, "%v", err)
		}
	}
	return nil
}

// Shape is the shape of a YAML mapping: its keys, each a scalar (nil) or a
// mapping of its own. Keys are matched exactly.
type Shape struct {
	Keys map[string]*Shape
	// Help says what the mapping holds, for the unknown-key error.
	Help string
}

// keyList is the shape's keys, sorted, for messages.
func (s *Shape) keyList() []string { return slices.Sorted(maps.Keys(s.Keys)) }

// Registry is the declared list of settings, plus the YAML-only sections
// (mappings such as columns:).
type Registry struct {
	settings []*Setting
	byName   map[string]*Setting
	sections map[string]*Shape
}

// NewRegistry declares settings, in --help order, and YAML sections. It
// panics on a name declared twice: that is a programming error.
func NewRegistry(sections map[string]*Shape, settings ...Declared) *Registry {
	r := &Registry{byName: map[string]*Setting{}, sections: sections}
	for _, d := range settings {
		s := d.setting()
		if r.byName[s.Name] != nil || sections[s.Name] != nil {
			panic("config: setting " + s.Name + " declared twice")
		}
		r.settings = append(r.settings, s)
		r.byName[s.Name] = s
	}
	return r
}

// Settings returns every declared setting, in declaration order.
func (r *Registry) Settings() []*Setting { return r.settings }

// Lookup returns the setting called name, or nil.
func (r *Registry) Lookup(name string) *Setting { return r.byName[name] }

// Sections returns the names of the YAML-only sections, sorted.
func (r *Registry) Sections() []string { return slices.Sorted(maps.Keys(r.sections)) }

// Error is a bad or missing setting, or a bad command line: the process
// exits 2. Key is the setting or flag ("" for the command line as a whole).
type Error struct {
	Key string
	Msg string
}

func (e *Error) Error() string {
	if e.Key == "" {
		return e.Msg
	}
	return fmt.Sprintf("--%s: %s", e.Key, e.Msg)
}

func errorf(key, format string, args ...any) *Error {
	return &Error{Key: key, Msg: fmt.Sprintf(format, args...)}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// orList writes a, b or c.
func orList(list []string) string {
	if len(list) == 1 {
		return list[0]
	}
	return strings.Join(list[:len(list)-1], ", ") + " or " + list[len(list)-1]
}
