#!/bin/sh
# Field tier, inside the Debian 13 guest: installed over /usr/bin/oci-coresched-hook after the
# package, so the engines run it exactly where the docs wire the hook. It keeps a copy of each
# state an engine sends (and the bundle's config.json, once per container) under
# /run/xchg/states/<phase>/, then runs the packaged binary with the same arguments and the same
# bytes on stdin. Any other command (list, inspect, ...) goes straight to the packaged binary.
real=/usr/lib/och-field/oci-coresched-hook
[ "${1:-}" = hook ] || exec "$real" "$@"
dir=/run/xchg/states/$(cat /run/och-field/phase 2>/dev/null || echo other)
mkdir -p "$dir"
tmp=$(mktemp "$dir/.state.XXXXXX") || exec "$real" "$@"
cat >"$tmp"
id=$(jq -r '.id // "unknown"' "$tmp" 2>/dev/null || echo unknown)
st=$(jq -r '.status // "unknown"' "$tmp" 2>/dev/null || echo unknown)
bundle=$(jq -r '.bundle // ""' "$tmp" 2>/dev/null)
n=$dir/$id.$(date +%s%N).$st.json
mv "$tmp" "$n"
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ] && [ ! -e "$dir/$id.config.json" ]; then
    cp "$bundle/config.json" "$dir/$id.config.json"
fi
exec "$real" "$@" <"$n"
