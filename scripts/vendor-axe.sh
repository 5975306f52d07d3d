#!/usr/bin/env bash
# Vendors axe-core, the accessibility checker the console's browser test
# (e2e/console_a11y_test.go) runs in every console page, for TESTS ONLY:
# nothing Parley builds or serves includes it. The minified bundle at the
# pinned version is fetched from the npm registry, checked against the
# integrity the registry publishes for the tarball and the one pinned here,
# then written to e2e/testdata/axe with axe-core's licence texts (MPL-2.0)
# beside it. AXE_SHA256 pins the bundle's sha256 for TestConsoleAccessibility,
# which reads it from this file and fails when the checked-in axe.min.js
# differs: the tarball's integrity already vouches for what this script
# writes, nothing else for the file as it is checked in.
#
#   scripts/vendor-axe.sh           fetch and write the files
#   scripts/vendor-axe.sh --check   fetch and compare: exits 1 when a
#                                   checked-in file differs
#
# To move to another version, change AXE_VERSION, AXE_INTEGRITY
# (npm view axe-core@<version> dist.integrity) and AXE_SHA256 (sha256sum
# of the tarball's package/axe.min.js), run the script, then run
# go test ./e2e -run TestConsoleAccessibility: a newer axe may know new
# rules the console's pages break.
# Needs npm, curl, openssl and tar.
set -euo pipefail
cd "$(dirname "$0")/.."

AXE_VERSION=4.14.1
AXE_INTEGRITY=sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==
# shellcheck disable=SC2034 # read by TestConsoleAccessibility, not here
AXE_SHA256=29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c
DEST=e2e/testdata/axe
# Tarball path -> vendored name.
declare -A FILES=(
  [package/axe.min.js]=axe.min.js
  [package/LICENSE]=LICENSE
  [package/LICENSE-3RD-PARTY.txt]=LICENSE-3RD-PARTY.txt
)

# shellcheck source=lib/npm-vendor.sh
. scripts/lib/npm-vendor.sh
npm_vendor_args "$@"
npm_vendor_fetch axe-core "$AXE_VERSION" "$AXE_INTEGRITY"
$check || mkdir -p "$DEST"
npm_vendor_write axe-core "$AXE_VERSION" "$AXE_INTEGRITY"
