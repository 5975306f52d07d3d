# Shared steps of the scripts that vendor a file from an npm package
# (vendor-axe.sh, vendor-docs-renderer.sh). Source it after setting:
#
#   FILES   associative array, tarball path -> vendored name
#   DEST    directory the vendored names live in
#
# then call, in order:
#
#   npm_vendor_args "$@"                 sets check=true for --check, exits 2
#                                        on anything else
#   npm_vendor_fetch PKG VERSION SRI     fetches PKG@VERSION's tarball, checks
#                                        the registry's integrity and the
#                                        tarball's against the pinned SRI,
#                                        extracts the FILES under $tmp
#   npm_vendor_write PKG VERSION SRI     writes each file to DEST, or with
#                                        --check compares; exits 1 when one
#                                        differs
#
# Needs npm, curl, openssl and tar.

npm_vendor_args() {
  check=false
  case "${1:-}" in
    "") ;;
    --check) check=true ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
  esac
}

npm_vendor_fetch() {
  local pkg=$1 version=$2 integrity=$3 registry_integrity tarball got
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT

  registry_integrity=$(npm view "$pkg@$version" dist.integrity 2>/dev/null)
  tarball=$(npm view "$pkg@$version" dist.tarball 2>/dev/null)
  if [ "$registry_integrity" != "$integrity" ]; then
    echo "the registry's integrity of $pkg@$version is $registry_integrity, not the pinned $integrity" >&2
    exit 1
  fi
  curl -fsSL --retry 3 -o "$tmp/package.tgz" "$tarball"
  got="sha512-$(openssl dgst -sha512 -binary "$tmp/package.tgz" | base64 -w0)"
  if [ "$got" != "$integrity" ]; then
    echo "$tarball has integrity $got, not $integrity" >&2
    exit 1
  fi
  tar -xzf "$tmp/package.tgz" -C "$tmp" "${!FILES[@]}"
}

npm_vendor_write() {
  local pkg=$1 version=$2 integrity=$3 src dst status=0
  for src in "${!FILES[@]}"; do
    dst="$DEST/${FILES[$src]}"
    if $check; then
      if ! cmp -s "$tmp/$src" "$dst"; then
        echo "$dst differs from $src of $pkg@$version" >&2
        status=1
      fi
    else
      install -m 0644 "$tmp/$src" "$dst"
      echo "wrote $dst"
    fi
  done
  if $check && [ $status -eq 0 ]; then
    echo "$DEST matches $pkg@$version ($integrity)"
  fi
  exit $status
}
