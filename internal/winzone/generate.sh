#!/usr/bin/env bash
# Regenerates zones.go from CLDR's windowsZones data (the npm package
# cldr-core, pinned below; Unicode License V3, UNICODE-LICENSE.txt).
# Run from this folder: go generate ./internal/winzone
set -euo pipefail
version=48.2.0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack "cldr-core@$version" --silent >/dev/null && tar xzf "cldr-core-$version.tgz")
cp "$tmp/package/LICENSE" UNICODE-LICENSE.txt
go run gen.go -in "$tmp/package/supplemental/windowsZones.json" -package-version "$version" -out zones.go
gofmt -w zones.go
