// Package main is replaced by TestWriteRefusesPool through a build
// overlay: each case compiles its own body here.
package main

func main() {}
