# maven-jars.sh is sourced by setup.sh and debezium.sh. It defines
#   maven_jars NAME POM DIR JAR...
# which resolves POM's runtime dependencies from Maven Central into DIR/libs,
# checks that every JAR is among them, and marks DIR complete with the pom's
# sha256, so that a second call with the same pom returns at once (status 0,
# printing nothing). It prints "<NAME>: ..." progress and, on failure, the
# tail of the Maven log, and returns non-zero. CACHE must be set.

maven_jars() {
	local name=$1 pom=$2 dir=$3
	shift 3
	local sum
	sum=$(sha256sum "$pom" | cut -d' ' -f1)
	[ "$(cat "$dir/.complete" 2>/dev/null)" = "$sum" ] && return 0
	printf '%s: resolving %s from Maven Central\n' "$name" "$(basename "$dir")"
	mkdir -p "$CACHE"
	local base
	base=$(basename "$dir")
	# Another setup sharing the cache may be resolving into its own
	# $base.tmp.*: remove only those a killed run left more than a day ago.
	find "$CACHE" -maxdepth 1 -name "$base.tmp.*" -mmin +1440 -exec rm -rf {} + 2>/dev/null || true
	local tmp log=$CACHE/$base-resolve.log
	tmp=$(mktemp -d "$CACHE/$base.tmp.XXXXXX")
	if ! mvn -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$tmp/libs" >"$tmp/resolve.log" 2>&1; then
		tail -n 40 "$tmp/resolve.log" >&2
		mv -f "$tmp/resolve.log" "$log"
		rm -rf "$tmp"
		return 1
	fi
	mv -f "$tmp/resolve.log" "$log"
	local jar
	for jar in "$@"; do
		[ -f "$tmp/libs/$jar" ] || { printf '%s: %s was not resolved (see %s)\n' "$name" "$jar" "$log" >&2; rm -rf "$tmp"; return 1; }
	done
	echo "$sum" >"$tmp/.complete"
	# A concurrent call may have completed DIR meanwhile: keep that one.
	# mv -T never moves into a directory that appeared since the rm -rf.
	if [ "$(cat "$dir/.complete" 2>/dev/null)" != "$sum" ]; then
		rm -rf "$dir"
		mv -T "$tmp" "$dir" 2>/dev/null || [ "$(cat "$dir/.complete" 2>/dev/null)" = "$sum" ] ||
			{ printf '%s: cannot move the jars into %s\n' "$name" "$dir" >&2; rm -rf "$tmp"; return 1; }
	fi
	rm -rf "$tmp"
}
