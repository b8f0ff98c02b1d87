#!/bin/bash
# The Debian package, installed and removed on this machine: build it (the test
# build, --debug), `dpkg -i`, check what it put where, start the installed vswd and
# ask it `vswctl show`, then `dpkg -r` and `dpkg -P`, and check that nothing of it is
# left. Root. vswd runs on sockets and a state file of this test's own; the package's
# directories (/var/lib/vsw) are what purge must remove. Run by scripts/test.sh.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "test-deb.sh: run as root"; exit 1; }
if dpkg -s vsw >/dev/null 2>&1; then
    echo "test-deb.sh: a vsw package is installed already; not touching it"; exit 1
fi
"$repo/packaging/build-deb.sh" --debug >/dev/null
deb=$(ls "$repo"/target/debian/vsw_*.deb | tail -1)
dir=$(mktemp -d /tmp/vsw-deb-test.XXXXXX)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    dpkg -P vsw >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "test-deb.sh: $*"; exit 1; }

dpkg -i "$deb" >/dev/null
for f in /usr/sbin/vswd /usr/bin/vswctl /usr/bin/vsw-bench /lib/systemd/system/vswd.service \
         /etc/default/vswd /usr/share/man/man8/vswd.8.gz /usr/share/man/man8/vswctl.8.gz \
         /usr/share/man/man1/vsw-bench.1.gz /usr/share/bash-completion/completions/vswctl \
         /usr/share/doc/vsw/OPERATIONS.md; do
    [ -e "$f" ] || fail "$f not installed"
done
# The unit is enabled for multi-user.target (not started: no service starts here).
[ -L /etc/systemd/system/multi-user.target.wants/vswd.service ] || fail "vswd.service not enabled"
systemd-analyze verify --man=no /lib/systemd/system/vswd.service || fail "the unit does not verify"
# The man page reads as one.
zcat /usr/share/man/man8/vswd.8.gz | grep -q "^.TH vswd 8" || fail "vswd.8 is no man page"

# Started as the unit starts it (here on this test's socket and state file).
/usr/sbin/vswd --socket "$dir/vswd.sock" --state-file "$dir/state.json" --log warn 2>"$dir/log" &
pid=$!
for _ in $(seq 100); do [ -S "$dir/vswd.sock" ] && break; sleep 0.1; done
/usr/bin/vswctl --socket "$dir/vswd.sock" add-port p1 type=ring >/dev/null
/usr/bin/vswctl --socket "$dir/vswd.sock" show | grep -q "p1" || fail "vswctl show: no p1"
kill "$pid"; wait "$pid" || fail "vswd did not stop cleanly: $(cat "$dir/log")"
pid=

mkdir -p /var/lib/vsw && echo '{}' > /var/lib/vsw/vswd.json
dpkg -r vsw >/dev/null
[ -e /usr/sbin/vswd ] && fail "vswd left after remove"
[ -e /etc/default/vswd ] || fail "the conffile went with remove (it stays until purge)"
dpkg -P vsw >/dev/null
[ -e /etc/default/vswd ] && fail "/etc/default/vswd left after purge"
[ -e /var/lib/vsw ] && fail "/var/lib/vsw left after purge"
[ -e /etc/systemd/system/multi-user.target.wants/vswd.service ] && fail "the unit's link left after purge"
dpkg -s vsw >/dev/null 2>&1 && fail "vsw still known to dpkg"
echo "test-deb.sh: installed, ran, removed and purged $(basename "$deb")"
