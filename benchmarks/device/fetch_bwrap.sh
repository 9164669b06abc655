#!/usr/bin/env bash
# Run HERE (a Debian/Ubuntu machine with apt), not on the GPU host: put a bubblewrap the GPU image can run
# (it has no package manager) into .carry/bwrap/:
#   .carry/bwrap/bwrap            wrapper: LD_LIBRARY_PATH=<here>/lib exec <here>/bin/bwrap "$@"
#   .carry/bwrap/bin/bwrap        Debian's binary (0.8.0 on bookworm; needs glibc >= 2.34)
#   .carry/bwrap/lib/             its libraries: libcap2, libselinux1, libpcre2-8-0
# On the GPU host: export PTXBENCH_BWRAP=$PWD/.carry/bwrap/bwrap (carry [".carry/bwrap"]). The sandbox
# clears the environment of what it runs (--clearenv), so LD_LIBRARY_PATH stops at bwrap.
# As root the sandbox runs as nobody; where the wrapper lies under a private home (mode 0700), the sandbox
# stages its folder for nobody (ptxcore/sandbox/reach.py), so no copy to /opt is needed.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.carry/bwrap
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -qq bubblewrap libcap2 libselinux1 libpcre2-8-0)
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
rm -rf "$out" && mkdir -p "$out/bin" "$out/lib"
cp "$work/root/usr/bin/bwrap" "$out/bin/bwrap"
for lib in libcap.so.2 libselinux.so.1 libpcre2-8.so.0; do
  cp -L "$(find "$work/root" -name "$lib" | head -1)" "$out/lib/$lib"
done
cat > "$out/bwrap" <<'EOF'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/lib" exec "$here/bin/bwrap" "$@"
EOF
chmod 755 "$out" "$out/bin" "$out/lib" "$out/bwrap" "$out/bin/bwrap"
chmod 644 "$out"/lib/*
echo "== libraries the carried bwrap resolves:"
LD_LIBRARY_PATH="$out/lib" ldd "$out/bin/bwrap"
echo "== glibc symbol versions it needs (the GPU host's glibc must be at least the newest):"
for f in "$out/bin/bwrap" "$out"/lib/*; do objdump -T "$f" | grep -o 'GLIBC_[0-9.]*'; done | sort -uV | tail -1
"$out/bwrap" --version
"$out/bwrap" --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
  --symlink usr/lib64 /lib64 --proc /proc --dev /dev -- /bin/sh -c 'echo "sandbox works: uid $(id -u)"'
du -sh "$out"
