package config

import (
	"fmt"
	"io"
	"strings"
)

// PrintHelp writes the command's --help: its usage, its action flags, and
// its settings with their defaults and env names.
func (c *Command) PrintHelp(w io.Writer) {
	fmt.Fprint(w, strings.TrimRight(c.Usage, "\n")+"\n")
	if len(c.Actions) > 0 {
		fmt.Fprint(w, "\nAction flags (the command line only, never env or YAML):\n")
		for _, a := range c.Actions {
			arg := ""
			if !a.Bool {
				arg = " " + a.Arg
			}
			writeItem(w, "--"+a.Name+arg, a.Help, "")
		}
	}
	if len(c.Settings) == 0 {
		return
	}
	fmt.Fprint(w, "\nSettings: each is a flag, an env var CDC_RELAY_<NAME> (or CDC_RELAY_<NAME>_FILE,\n"+
		"a file holding the value, for secrets; the plain variable wins when both are\n"+
		"set), and a key of the --config YAML file. Precedence: flag > env > YAML >\n"+
		"default. A true/false setting may be given bare (--flag means --flag true).\n")
	for _, name := range c.Settings {
		s := c.Registry.byName[name]
		arg := ""
		if s.Kind != Bool {
			arg = " " + s.arg()
		}
		var tail []string
		switch {
		case contains(c.Required, name):
			tail = append(tail, "required")
		case s.Default != "":
			tail = append(tail, fmt.Sprintf("default %s", s.Default))
		}
		tail = append(tail, "env "+s.Env())
		if s.NoYAML {
			tail = append(tail, "not in YAML")
		}
		writeItem(w, "--"+name+arg, s.Help, strings.Join(tail, "; "))
	}
}

func (s *Setting) arg() string {
	if s.Arg != "" {
		return s.Arg
	}
	switch s.Kind {
	case Int:
		return "N"
	case Duration:
		return "DURATION"
	case List:
		return "LIST"
	}
	if len(s.Choices) > 0 {
		return strings.Join(s.Choices, "|")
	}
	return "VALUE"
}

// writeItem writes a flag and its help, wrapped at 80 columns.
func writeItem(w io.Writer, flag, help, tail string) {
	fmt.Fprintf(w, "  %s\n", flag)
	line := "       "
	for _, word := range strings.Fields(help) {
		if len(line)+1+len(word) > 80 && strings.TrimSpace(line) != "" {
			fmt.Fprintln(w, line)
			line = "       "
		}
		line += " " + word
	}
	fmt.Fprintln(w, line)
	if tail != "" {
		fmt.Fprintf(w, "        (%s)\n", tail)
	}
}
