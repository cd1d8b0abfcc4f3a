#!/usr/bin/env bash
# debezium-server.sh installs what the Debezium Server side of the RabbitMQ
# drain benchmark (make bench-debezium BROKER=rabbitmq) needs: Debezium
# Server's distribution (a tar.gz of about 780 MB from Maven Central, its
# sha1 checked) unpacked once into $CACHE/debezium-server-<version>, and a
# Java 21 or later to run it (its classes are Java 21's; Debian 12 packages
# only 17). CACHE is ${CDC_RELAY_CACHE:-$HOME/.cache/cdc-relay}. A
# .complete marker ends the unpacking: a second run downloads nothing. The
# java found (CDC_RELAY_JAVA21, else the newest JDK 21+ under /usr/lib/jvm)
# is written to $CACHE/debezium-server-<version>/java on every run, where
# the benchmark reads it. Only that benchmark runs this script: make test
# does not.
set -euo pipefail

version=3.6.0.Final
cache=${CDC_RELAY_CACHE:-${HOME:?HOME is not set; set CDC_RELAY_CACHE}/.cache/cdc-relay}
dir=$cache/debezium-server-$version
url=https://repo.maven.apache.org/maven2/io/debezium/debezium-server-dist/$version/debezium-server-dist-$version.tar.gz
tarball=$cache/debezium-server-dist-$version.tar.gz
step="starting"

say() { printf 'debezium-server: %s\n' "$*"; }
trap 'rc=$?; [ "$rc" -eq 0 ] || printf "debezium-server: FAILED while %s (exit %d)\n" "$step" "$rc" >&2' EXIT

step="finding Java 21 or later"
java=${CDC_RELAY_JAVA21:-}
if [ -z "$java" ]; then
	best=0
	for rel in /usr/lib/jvm/*/release; do
		[ -f "$rel" ] || continue
		major=$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$rel")
		if [ -n "$major" ] && [ "$major" -ge 21 ] && [ "$major" -gt "$best" ] && [ -x "$(dirname "$rel")/bin/java" ]; then
			java=$(dirname "$rel")/bin/java
			best=$major
		fi
	done
fi
if [ -z "$java" ] || ! "$java" -version >/dev/null 2>&1; then
	echo "debezium-server: Debezium Server $version needs Java 21 or later, and /usr/lib/jvm has none: install a Temurin 21+ JDK or set CDC_RELAY_JAVA21 to its java" >&2
	exit 1
fi

if [ ! -f "$dir/.complete" ]; then
	command -v curl >/dev/null || { echo "debezium-server: curl is not on PATH" >&2; exit 1; }
	step="fetching the sha1 of debezium-server-dist $version"
	mkdir -p "$cache"
	want=$(curl -fsSL "$url.sha1" | cut -c1-40)
	have=
	[ -f "$tarball" ] && have=$(sha1sum "$tarball" | cut -c1-40)
	if [ "$have" != "$want" ]; then
		step="downloading debezium-server-dist $version (about 780 MB)"
		say "downloading $url"
		curl -fSL --retry 3 -o "$tarball.part" "$url"
		have=$(sha1sum "$tarball.part" | cut -c1-40)
		[ "$have" = "$want" ] || { echo "debezium-server: sha1 $have of the download, want $want" >&2; rm -f "$tarball.part"; exit 1; }
		mv "$tarball.part" "$tarball"
	fi
	step="unpacking debezium-server-dist $version"
	rm -rf "$dir" "$dir".tmp
	mkdir -p "$dir".tmp
	tar xzf "$tarball" -C "$dir".tmp
	[ -f "$dir".tmp/debezium-server/lib/debezium-server-rabbitmq-$version.jar ] ||
		{ echo "debezium-server: no debezium-server-rabbitmq-$version.jar in the archive" >&2; exit 1; }
	mv "$dir".tmp "$dir"
	touch "$dir/.complete"
	rm -f "$tarball"
fi
printf '%s\n' "$java" >"$dir/java"
say "Debezium Server $version ok ($dir/debezium-server), Java $("$java" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1) ($java)"
