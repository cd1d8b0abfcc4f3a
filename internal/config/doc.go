// Package config is cdc-relay's one configuration layer. Every setting is
// declared once (Setting: name, kind, default, help, validation; its env
// name, CDC_RELAY_<NAME>, its _FILE variant and its YAML key follow from
// the name), every subcommand declares the settings and the action flags
// it takes (Command), and Load resolves them the same way for all:
// flag > env (CDC_RELAY_<NAME>, else CDC_RELAY_<NAME>_FILE) > --config
// YAML > default. Action flags come from the command line only.
//
// In: the command line, the environment, the YAML file. Out: Values, typed
// and validated one setting at a time, or an *Error naming the setting and
// the fix (the caller exits 2). It owns the flag syntax (Go's flag package:
// -flag and --flag, --flag=value, --flag value, and --flag true for a
// true/false setting) and the strict YAML schema: an unknown key at any
// depth is an error naming its path. It does no I/O besides reading the
// YAML file and the _FILE files, and needs no service.
//
// Each setting is a typed variable (PGURL, KafkaTLS, ...) read with its From
// method, so that a misspelt setting does not compile. The declarations
// also write docs/CONFIGURATION.md's settings table (SettingsTable): after
// changing one, run go generate ./internal/config/.
package config

//go:generate go run ./gentable ../../docs/CONFIGURATION.md
