#!/bin/sh
# The shared library's dynamic symbol table must be exactly the functions
# declared in include/bloomery/*.h: an extra name is an internal helper
# leaking into the ABI (e.g. the library built without -fvisibility=hidden),
# a missing one is a public function without BLOOMERY_API.
#   check_exports.sh CC INCLUDE_DIR LIBRARY
set -eu
cc=$1 inc=$2 lib=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# gcc's -aux-info lists every prototype a translation unit sees, with the
# file that declares it: compile one that includes every public header.
for h in "$inc"/bloomery/*.h; do
    echo "#include <bloomery/$(basename "$h")>"
done >"$tmp/all.c"
"$cc" -std=gnu11 -I"$inc" -fsyntax-only -aux-info "$tmp/aux" "$tmp/all.c"
grep "/bloomery/[a-z_]*\.h:[0-9]*:NC \*/ extern " "$tmp/aux" |
    sed -e 's|^/\*[^*]*\*/ extern ||' -e 's| (.*||' -e 's|.*[ *]||' | sort -u >"$tmp/declared"
if [ ! -s "$tmp/declared" ]; then
    echo "no public declarations found under $inc/bloomery" >&2
    exit 1
fi

# Version suffixes (name@@VER) are not part of the name.
nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"

status=0
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
if [ -n "$extra" ]; then
    echo "exported but not declared in $inc/bloomery (internal symbols leaking):" >&2
    echo "$extra" | sed 's/^/  /' >&2
    status=1
fi
if [ -n "$missing" ]; then
    echo "declared in $inc/bloomery but not exported (missing BLOOMERY_API?):" >&2
    echo "$missing" | sed 's/^/  /' >&2
    status=1
fi
[ $status -eq 0 ] && echo "$(wc -l <"$tmp/exported") exported symbols, all public"
exit $status
