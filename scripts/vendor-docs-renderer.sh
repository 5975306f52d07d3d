#!/usr/bin/env bash
# Vendors the renderer of the gateway's API reference page (GET /docs):
# Redoc's standalone bundle at the pinned version, fetched from the npm
# registry, checked against the integrity the registry publishes for it and
# against the one pinned here, and written where the gateway embeds it
# (go:embed), with Redoc's licence texts beside it.
#
#   scripts/vendor-docs-renderer.sh           fetch and write the files
#   scripts/vendor-docs-renderer.sh --check   fetch and compare: exits 1
#                                             when a checked-in file differs
#
# To move to another version, change REDOC_VERSION and REDOC_INTEGRITY
# (npm view redoc@<version> dist.integrity), run the script, then run the
# browser test (go test ./e2e -run TestAPIReferenceInTheBrowser): it fails
# on any request the new bundle makes beyond the gateway and on any inline
# style the page's Content-Security-Policy does not allow (docs.go).
# Needs npm, curl, openssl and tar.
set -euo pipefail
cd "$(dirname "$0")/.."

REDOC_VERSION=2.5.4
REDOC_INTEGRITY=sha512-M6jWhG1qoBnH6TFmzJnstyCZ87HmOY/UzDm78mHiYihEdlV/YcS9ogOo1NlElnJMeLsyxHFe2yFc4sNjHTrABQ==
DEST=services/gateway/internal/ports/http/docs/assets
# Tarball path -> vendored name.
declare -A FILES=(
  [package/bundles/redoc.standalone.js]=redoc.standalone.js
  [package/bundles/redoc.standalone.js.LICENSE.txt]=redoc.standalone.js.LICENSE.txt
  [package/LICENSE]=redoc.LICENSE
)

# shellcheck source=lib/npm-vendor.sh
. scripts/lib/npm-vendor.sh
npm_vendor_args "$@"
npm_vendor_fetch redoc "$REDOC_VERSION" "$REDOC_INTEGRITY"
npm_vendor_write redoc "$REDOC_VERSION" "$REDOC_INTEGRITY"
