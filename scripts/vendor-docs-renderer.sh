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

check=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

registry_integrity=$(npm view "redoc@$REDOC_VERSION" dist.integrity 2>/dev/null)
tarball=$(npm view "redoc@$REDOC_VERSION" dist.tarball 2>/dev/null)
if [ "$registry_integrity" != "$REDOC_INTEGRITY" ]; then
  echo "the registry's integrity of redoc@$REDOC_VERSION is $registry_integrity, not the pinned $REDOC_INTEGRITY" >&2
  exit 1
fi
curl -fsSL --retry 3 -o "$tmp/redoc.tgz" "$tarball"
got="sha512-$(openssl dgst -sha512 -binary "$tmp/redoc.tgz" | base64 -w0)"
if [ "$got" != "$REDOC_INTEGRITY" ]; then
  echo "$tarball has integrity $got, not $REDOC_INTEGRITY" >&2
  exit 1
fi
tar -xzf "$tmp/redoc.tgz" -C "$tmp" "${!FILES[@]}"

status=0
for src in "${!FILES[@]}"; do
  dst="$DEST/${FILES[$src]}"
  if $check; then
    if ! cmp -s "$tmp/$src" "$dst"; then
      echo "$dst differs from $src of redoc@$REDOC_VERSION" >&2
      status=1
    fi
  else
    install -m 0644 "$tmp/$src" "$dst"
    echo "wrote $dst"
  fi
done
if $check && [ $status -eq 0 ]; then
  echo "$DEST matches redoc@$REDOC_VERSION ($REDOC_INTEGRITY)"
fi
exit $status
