#!/usr/bin/env bash
# Builds Citus 13.2.2 (the last line that supports PostgreSQL 15) from source
# and installs it into the PostgreSQL that pg_config names, for
# deploy/citus/cluster.sh. Debian does not package Citus.
#
#   deploy/citus/build.sh [SRC_DIR] [PG_CONFIG]
#
# SRC_DIR: a Citus v13.2.2 source tree; without it the tag is cloned from
# github.com/citusdata/citus into a temporary directory. Installs the build
# dependencies with apt-get (run as root).
set -euo pipefail
pg_config=${2:-$(ls /usr/lib/postgresql/*/bin/pg_config 2>/dev/null | sort -V | head -1)}
[ -x "$pg_config" ] || { echo "no pg_config: apt-get install postgresql-server-dev-15" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
major=$("$pg_config" --version | grep -Eo '[0-9]+' | head -1)
apt-get install -y -qq "postgresql-server-dev-$major" flex bison liblz4-dev libzstd-dev \
  libkrb5-dev libxslt1-dev libpam0g-dev libreadline-dev git >/dev/null
src=${1:-}
if [ -z "$src" ]; then
  src=$(mktemp -d)
  git clone -q --depth 1 --branch v13.2.2 https://github.com/citusdata/citus "$src"
fi
# Debian's PostgreSQL 15.18 exports have_createdb_privilege(), which Citus
# 13.2 also defines as a static compatibility function for versions before
# 16: the two clash, so Citus' copy is taken out.
inc=$("$pg_config" --includedir-server)
compat="$src/src/include/pg_version_compat.h"
if grep -q "extern bool have_createdb_privilege" "$inc/commands/dbcommands.h" 2>/dev/null &&
   grep -q "^have_createdb_privilege(void)" "$compat"; then
  python3 - "$compat" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
a = s.index("static inline bool\nhave_createdb_privilege(void)")
b = s.index("typedef bool TU_UpdateIndexes;")
open(p, "w").write(s[:a] + "/* have_createdb_privilege(): exported by this PostgreSQL */\n\n" + s[b:])
PY
fi
cd "$src"
./configure --without-libcurl PG_CONFIG="$pg_config" >/dev/null
make -j"$(nproc)" >/dev/null
make install >/dev/null
echo "citus installed into $("$pg_config" --pkglibdir)"
