package config

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrHelp is returned by Load after it printed --help.
var ErrHelp = flag.ErrHelp

// Command is a subcommand: the settings it takes and its action flags.
type Command struct {
	// Name is the command line that starts it: "cdc-relay check".
	Name string
	// Usage is the top of --help: the usage line(s) and what it does.
	Usage string
	// Settings are the registry names it resolves, in --help order.
	Settings []string
	// Required are the settings that must not resolve to "".
	Required []string
	// OneOf are settings of which exactly one must not resolve to "" (the
	// broker: --kafka-brokers or --rabbitmq-url); none is reported as the
	// first one missing.
	OneOf []string
	// Actions are its flags that are not configuration: read from the
	// command line only, never from env or YAML.
	Actions []Action
	// Args names the arguments it takes besides flags (TOPIC), for
	// messages; "" means none, and an argument is an error. Flags and
	// arguments may come in any order.
	Args string
	// Registry declares the settings.
	Registry *Registry
}

// Action is a flag that is an action, not configuration (--accept-gap,
// --since, --json): it is never read from the environment or YAML.
type Action struct {
	Name string
	// Bool: true/false, a bare flag means true.
	Bool bool
	// Arg names the value in --help (TIME, ID, TEXT).
	Arg  string
	Help string
}

// Source says where a value came from.
type Source int

// The sources, in precedence order.
const (
	FromDefault Source = iota
	FromYAML
	FromEnv
	FromFlag
)

// Values are a command's resolved settings and action flags.
type Values struct {
	cmd     *Command
	vals    map[string]string
	source  map[string]Source
	actions map[string]string
	args    []string
	file    *File
}

// Load resolves cmd's settings from args, the environment and the --config
// YAML file, and its action flags from args. After -h or --help it prints
// the command's help to help and returns ErrHelp. A warning (X and X_FILE
// both set) goes to log. Every other failure is an *Error.
func Load(cmd *Command, args []string, getenv func(string) string, help io.Writer, log *slog.Logger) (*Values, error) {
	p, err := parse(cmd, args)
	if errors.Is(err, ErrHelp) {
		cmd.PrintHelp(help)
		return nil, ErrHelp
	}
	if err != nil {
		return nil, err
	}
	v := &Values{cmd: cmd, vals: map[string]string{}, source: map[string]Source{}, actions: p.actions, args: p.args}
	// --config first: the YAML file is the fallback of every other setting.
	if cmd.takes("config") {
		path, src, err := v.fromFlagOrEnv("config", p, getenv, log)
		if err != nil {
			return nil, err
		}
		if src != FromDefault && strings.TrimSpace(path) != "" {
			if v.file, err = cmd.Registry.ReadFile(strings.TrimSpace(path)); err != nil {
				return nil, err
			}
		}
		v.vals["config"], v.source["config"] = strings.TrimSpace(path), src
	}
	for _, name := range cmd.Settings {
		if name == "config" {
			continue
		}
		s := cmd.Registry.byName[name]
		val, src, err := v.fromFlagOrEnv(name, p, getenv, log)
		if err != nil {
			return nil, err
		}
		if src == FromDefault {
			if yv, ok := v.file.Value(name); ok {
				val, src = yv, FromYAML
			} else {
				val = s.Default
			}
		}
		v.vals[name], v.source[name] = strings.TrimSpace(val), src
	}
	for _, name := range cmd.Required {
		if v.vals[name] == "" {
			return nil, errorf(name, "is required: set the flag, %s, or %s in --config", EnvName(name), name)
		}
	}
	if err := v.oneOf(cmd.OneOf); err != nil {
		return nil, err
	}
	for _, name := range cmd.Settings {
		if err := cmd.Registry.byName[name].validate(v.vals[name]); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// fromFlagOrEnv resolves one setting from the flag, else CDC_RELAY_<NAME>,
// else CDC_RELAY_<NAME>_FILE (the file's content, trailing newlines cut).
func (v *Values) fromFlagOrEnv(name string, p *parsed, getenv func(string) string, log *slog.Logger) (string, Source, error) {
	if val, ok := p.settings[name]; ok {
		return val, FromFlag, nil
	}
	env := EnvName(name)
	val, fileName := getenv(env), getenv(env+"_FILE")
	if val != "" {
		if fileName != "" && log != nil {
			log.Warn("both "+env+" and "+env+"_FILE are set: "+env+" wins; unset one of them", "setting", name)
		}
		return val, FromEnv, nil
	}
	if fileName != "" {
		b, err := os.ReadFile(fileName)
		if err != nil {
			return "", FromEnv, errorf(name, "cannot read %s_FILE %s: %v", env, fileName, err)
		}
		return strings.TrimRight(string(b), "\r\n"), FromEnv, nil
	}
	return "", FromDefault, nil
}

func (c *Command) takes(name string) bool { return contains(c.Settings, name) }

// Takes reports whether the command resolves the setting name.
func (v *Values) Takes(name string) bool { return v.cmd.takes(name) }

func (c *Command) action(name string) *Action {
	for i := range c.Actions {
		if c.Actions[i].Name == name {
			return &c.Actions[i]
		}
	}
	return nil
}

// String returns a setting's resolved text.
func (v *Values) String(name string) string { v.mustTake(name); return v.vals[name] }

// Bool returns a true/false setting.
func (v *Values) Bool(name string) bool { return v.String(name) == "true" }

// Int returns a whole-number setting.
func (v *Values) Int(name string) int64 {
	n, _ := strconv.ParseInt(v.String(name), 10, 64)
	return n
}

// Duration returns a duration setting.
func (v *Values) Duration(name string) time.Duration {
	d, _ := time.ParseDuration(v.String(name))
	return d
}

// List returns a comma-separated setting's items, trimmed, empty ones dropped.
func (v *Values) List(name string) []string {
	var out []string
	for _, x := range strings.Split(v.String(name), ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// Source returns where a setting's value came from.
func (v *Values) Source(name string) Source { v.mustTake(name); return v.source[name] }

// File returns the --config file, or nil.
func (v *Values) File() *File { return v.file }

// Action returns an action flag's value and whether it was given. A bool
// action given bare is "true".
func (v *Values) Action(name string) (string, bool) {
	if v.cmd.action(name) == nil {
		panic("config: " + v.cmd.Name + " has no action flag --" + name)
	}
	a, ok := v.actions[name]
	return a, ok
}

// Args returns the arguments given besides flags, in order (only a
// command with Args takes any).
func (v *Values) Args() []string { return v.args }

// ActionBool reports whether a true/false action flag is true.
func (v *Values) ActionBool(name string) bool { a, _ := v.Action(name); return a == "true" }

func (v *Values) mustTake(name string) {
	if !v.cmd.takes(name) {
		panic("config: " + v.cmd.Name + " does not take --" + name)
	}
}

// oneOf checks that exactly one of names is set.
func (v *Values) oneOf(names []string) error {
	var set []string
	for _, name := range names {
		if v.vals[name] != "" {
			set = append(set, name)
		}
	}
	switch {
	case len(names) == 0 || len(set) == 1:
		return nil
	case len(set) == 0:
		others := make([]string, 0, len(names)-1)
		for _, name := range names[1:] {
			others = append(others, "--"+name)
		}
		return errorf(names[0], "is required: set the flag, %s, or %s in --config; or set %s instead", EnvName(names[0]), names[0], orList(others))
	}
	return errorf(set[1], "is set and so is --%s: set exactly one of them", set[0])
}
