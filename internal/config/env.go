package config

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
)

// envPrefix starts the environment variable of every setting.
const envPrefix = "CDC_RELAY_"

// UnknownEnv says what is wrong with the environment variable name when it
// starts with CDC_RELAY_ but no setting reads it (a typo such as
// CDC_RELAY_KAFKA_BROKER, which would otherwise be ignored without a word):
// the message names the nearest setting's variable, or says that an action
// flag is never read from the environment. unknown is false for every other
// name: a setting's CDC_RELAY_<NAME> and CDC_RELAY_<NAME>_FILE, the
// variables Kubernetes injects for a Service named cdc-relay
// (CDC_RELAY_SERVICE_HOST, CDC_RELAY_SERVICE_PORT*, CDC_RELAY_PORT*), and
// names without the prefix.
func (r *Registry) UnknownEnv(name, command string) (msg string, unknown bool) {
	rest, ok := strings.CutPrefix(name, envPrefix)
	if !ok || rest == "" || kubernetesServiceEnv(rest) {
		return "", false
	}
	base, isFile := strings.CutSuffix(rest, "_FILE")
	if r.byEnv(name) != nil || isFile && r.byEnv(envPrefix+base) != nil {
		return "", false
	}
	msg = "unknown environment variable " + name + ": no setting reads it"
	if isFile {
		rest = base
	}
	if a, cmds := actionByEnv(rest); a != "" {
		return msg + fmt.Sprintf("; --%s is a command-line flag of %s, never read from the environment", a, andList(cmds)), true
	}
	var names []string
	for _, s := range r.settings {
		names = append(names, strings.TrimPrefix(s.Env(), envPrefix))
	}
	if near := nearest(rest, names); near != "" {
		s := r.byEnv(envPrefix + near)
		env := s.Env()
		if isFile {
			env += "_FILE"
		}
		return msg + fmt.Sprintf("; did you mean %s (--%s)?", env, s.Name), true
	}
	if command == "" {
		command = "cdc-relay COMMAND"
	}
	return msg + " (" + command + " --help lists each setting's env name)", true
}

// WarnUnknownEnv logs a warning for each of names that UnknownEnv finds
// unknown, in sorted order; command names the command for the --help hint.
// The value is never logged: it may be a secret.
func (r *Registry) WarnUnknownEnv(names []string, command string, log *slog.Logger) {
	if log == nil {
		return
	}
	names = append([]string(nil), names...)
	sort.Strings(names)
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		if msg, unknown := r.UnknownEnv(name, command); unknown {
			log.Warn(msg, "env", name)
		}
	}
}

// byEnv returns the setting whose environment variable is env, or nil.
func (r *Registry) byEnv(env string) *Setting {
	for _, s := range r.settings {
		if s.Env() == env {
			return s
		}
	}
	return nil
}

// kubernetesServiceEnv reports whether rest (a name after CDC_RELAY_) is one
// of the variables Kubernetes injects into every pod of the namespace for a
// Service named cdc-relay: CDC_RELAY_SERVICE_HOST, CDC_RELAY_SERVICE_PORT,
// CDC_RELAY_SERVICE_PORT_<PORT NAME>, CDC_RELAY_PORT and
// CDC_RELAY_PORT_<PORT>_<PROTOCOL>[_PROTO|_PORT|_ADDR].
func kubernetesServiceEnv(rest string) bool {
	return rest == "SERVICE_HOST" || rest == "SERVICE_PORT" || strings.HasPrefix(rest, "SERVICE_PORT_") ||
		rest == "PORT" || strings.HasPrefix(rest, "PORT_")
}

// actionByEnv returns the action flag whose name, as an environment
// variable, is rest, and the commands that take it.
func actionByEnv(rest string) (string, []string) {
	var name string
	var cmds []string
	for _, c := range Commands() {
		for _, a := range c.Actions {
			if strings.TrimPrefix(EnvName(a.Name), envPrefix) == rest {
				name = a.Name
				cmds = append(cmds, c.Name)
			}
		}
	}
	return name, cmds
}

// andList writes a, b and c.
func andList(list []string) string {
	if len(list) == 1 {
		return list[0]
	}
	return strings.Join(list[:len(list)-1], ", ") + " and " + list[len(list)-1]
}
