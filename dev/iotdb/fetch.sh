#!/usr/bin/env bash
# Download an Apache IoTDB server (ConfigNode + DataNode) with all runtime dependencies
# from Maven Central into one flat lib directory, for dev/iotdb/server.py.
#
#   dev/iotdb/fetch.sh [LIB_DIR]
#
# LIB_DIR defaults to $AIRFLOW_STREAM_HOME/iotdb/lib ($AIRFLOW_STREAM_HOME defaults to
# ~/airflow-stream). Idempotent: when LIB_DIR already holds a complete download (marker file
# .complete-<version>), it does nothing. Needs java and mvn on PATH. ~105 MB.
set -euo pipefail

VERSION="${IOTDB_VERSION:-2.0.1-beta}"
HOME_DIR="${AIRFLOW_STREAM_HOME:-$HOME/airflow-stream}"
LIB="${1:-$HOME_DIR/iotdb/lib}"
mkdir -p "$LIB"
LIB="$(cd "$LIB" && pwd)"  # absolute: Maven resolves a relative output directory against its pom's folder
MARKER="$LIB/.complete-$VERSION"

die() { echo "fetch.sh: error: $*" >&2; exit 1; }

if [[ -f "$MARKER" ]] && ls "$LIB"/iotdb-server-"$VERSION".jar "$LIB"/iotdb-confignode-"$VERSION".jar >/dev/null 2>&1; then
    echo "fetch.sh: $LIB already complete (IoTDB $VERSION, $(ls "$LIB"/*.jar | wc -l) jars)"
    exit 0
fi

command -v mvn >/dev/null 2>&1 || die "mvn (Apache Maven) not found on PATH; install it (e.g. apt-get install maven)"
command -v java >/dev/null 2>&1 || die "java not found on PATH; IoTDB $VERSION needs Java 11+ (17 tested)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/iotdb-fetch.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.airflow-stream</groupId>
  <artifactId>iotdb-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.iotdb</groupId>
      <artifactId>iotdb-server</artifactId>
      <version>$VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.iotdb</groupId>
      <artifactId>iotdb-confignode</artifactId>
      <version>$VERSION</version>
    </dependency>
  </dependencies>
</project>
EOF

mkdir -p "$LIB"
for jar in "$LIB"/iotdb-server-*.jar; do
    [[ -e "$jar" && "$jar" != "$LIB/iotdb-server-$VERSION.jar" ]] &&
        die "$LIB holds another IoTDB version ($(basename "$jar")); empty it or choose another directory"
done
rm -f "$LIB"/.complete-*
echo "fetch.sh: resolving org.apache.iotdb:iotdb-server/iotdb-confignode:$VERSION into $LIB ..."
# runtime scope = compile + runtime dependencies (no test/provided ones).
if ! mvn -B -q -f "$WORK/pom.xml" \
        org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$LIB" -DoverWriteIfNewer=true \
        >"$WORK/mvn.log" 2>&1; then
    tail -n 40 "$WORK/mvn.log" >&2
    die "Maven could not resolve IoTDB $VERSION and its dependencies (see above); is Maven Central reachable?"
fi

for jar in iotdb-server iotdb-confignode; do
    [[ -f "$LIB/$jar-$VERSION.jar" ]] || die "$jar-$VERSION.jar missing in $LIB after download"
done
touch "$MARKER"
echo "fetch.sh: done: $(ls "$LIB"/*.jar | wc -l) jars, $(du -sh "$LIB" | cut -f1) in $LIB"
