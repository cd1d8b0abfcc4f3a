//go:build !linux

package main

import "errors"

// pinBench is Linux only: the benchmark reads /proc and pins with
// sched_setaffinity.
func pinBench() (pinPG func(dataDir string) error, desc string, err error) {
	return nil, "", errors.New("--pin-cpus needs Linux")
}
