package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// parsed is a command line: the settings and action flags it gives.
type parsed struct {
	settings map[string]string
	actions  map[string]string
	args     []string // the arguments that are not flags (Command.Args)
}

// value is every flag's flag.Value: it keeps the text, for the setting's
// kind to parse after resolution, so that a flag, an env var and a YAML
// key are checked by the same rule and named the same way.
type value struct {
	name   string
	dst    map[string]string
	isBool bool
	list   bool // repeated: values joined with commas (--table)
	action bool // an action flag: given once
	err    *Error
}

func (f *value) String() string { return "" }

func (f *value) IsBoolFlag() bool { return f.isBool }

func (f *value) Set(s string) error {
	old, seen := f.dst[f.name]
	switch {
	case seen && f.list:
		f.dst[f.name] = old + "," + s
	case seen && f.action && f.err == nil:
		f.err = errorf(f.name, "is given twice")
	default:
		f.dst[f.name] = s
	}
	return nil
}

// parse reads args with Go's flag package, so that -flag, --flag,
// --flag=value and --flag value work as they always did, plus --flag true
// for a true/false flag (joinBoolArgs).
func parse(cmd *Command, args []string) (*parsed, error) {
	p := &parsed{settings: map[string]string{}, actions: map[string]string{}}
	fs := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var values []*value
	bools := map[string]bool{}
	for _, name := range cmd.Settings {
		s := cmd.Registry.byName[name]
		if s == nil {
			panic("config: " + cmd.Name + " takes undeclared setting " + name)
		}
		f := &value{name: name, dst: p.settings, isBool: s.Kind == Bool, list: s.Kind == List}
		fs.Var(f, name, s.Help)
		bools[name] = f.isBool
		values = append(values, f)
	}
	for _, a := range cmd.Actions {
		f := &value{name: a.Name, dst: p.actions, isBool: a.Bool, action: true}
		fs.Var(f, a.Name, a.Help)
		bools[a.Name] = a.Bool
		values = append(values, f)
	}
	rest := joinBoolArgs(args, bools, cmd.Args != "")
	for {
		before := rest
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, ErrHelp
			}
			return nil, cmd.flagError(err)
		}
		if fs.NArg() == 0 {
			break
		}
		if cmd.Args == "" {
			return nil, &Error{Msg: fmt.Sprintf("unexpected argument %q: %s takes flags only, e.g. --%s (%s --help lists them)", fs.Arg(0), cmd.Name, cmd.firstFlag(), cmd.Name)}
		}
		// The flag package stops at the first argument: keep it and read
		// the flags after it, unless "--" ended the flags.
		rest = fs.Args()
		if used := len(before) - len(rest); used > 0 && before[used-1] == "--" {
			p.args = append(p.args, rest...)
			break
		}
		p.args = append(p.args, rest[0])
		rest = rest[1:]
	}
	for _, f := range values {
		if f.err != nil {
			return nil, f.err
		}
		if a, given := p.actions[f.name]; f.action && f.isBool && given && a != "true" && a != "false" {
			return nil, errorf(f.name, "%q is not true or false", a)
		}
	}
	return p, nil
}

// flagError turns the flag package's errors into ones naming the flag and
// the fix: an unknown flag names the nearest known one.
func (c *Command) flagError(err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		if c.Registry.byName[name] != nil {
			return &Error{Msg: fmt.Sprintf("unknown flag --%s: %s does not take it; its flags are %s (%s --help)", name, c.Name, c.flagList(), c.Name)}
		}
		hint := ""
		if near := nearest(name, c.flagNames()); near != "" {
			hint = fmt.Sprintf(": did you mean --%s?", near)
		}
		return &Error{Msg: fmt.Sprintf("unknown flag --%s%s (%s --help lists the flags)", name, hint, c.Name)}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return errorf(strings.TrimLeft(name, "-"), "needs a value")
	}
	return &Error{Msg: msg}
}

func (c *Command) flagNames() []string {
	names := append([]string{}, c.Settings...)
	for _, a := range c.Actions {
		names = append(names, a.Name)
	}
	return names
}

func (c *Command) flagList() string {
	names := c.flagNames()
	for i, n := range names {
		names[i] = "--" + n
	}
	return strings.Join(names, ", ")
}

func (c *Command) firstFlag() string {
	for _, n := range c.flagNames() {
		if n != "config" {
			return n
		}
	}
	return "help"
}

// joinBoolArgs turns "--flag value" of a true/false flag into
// "--flag=value": the flag package would take a bare boolean flag and leave
// the value as an argument. A command without arguments takes none, so a
// word after such a flag is its value, and a wrong one is refused naming
// the flag; for a command with arguments (takesArgs) only true or false is
// the flag's value, any other word an argument. The value of any other flag
// is passed over, even when it starts with a dash.
func joinBoolArgs(args []string, bools map[string]bool, takesArgs bool) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		name := strings.TrimLeft(a, "-")
		if a == name || strings.Contains(name, "=") || i+1 >= len(args) {
			out = append(out, a)
			continue
		}
		isBool, known := bools[name]
		switch {
		case known && isBool && !strings.HasPrefix(args[i+1], "-") && (!takesArgs || args[i+1] == "true" || args[i+1] == "false"):
			out = append(out, a+"="+args[i+1])
			i++
		case known && !isBool:
			out = append(out, a, args[i+1])
			i++
		default:
			out = append(out, a)
		}
	}
	return out
}

// nearest returns the candidate closest to name (edit distance, - and _
// alike), or "" when none is close: at most a third of the name's length,
// and at least 2, edits away.
func nearest(name string, candidates []string) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "-")) }
	best, bestD := "", -1
	for _, c := range candidates {
		d := editDistance(norm(name), norm(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	limit := len(name) / 3
	if limit < 2 {
		limit = 2
	}
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
