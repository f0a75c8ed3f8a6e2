#!/usr/bin/env bash
# Downloads into .devdeps/ the Debian 12 .deb files that building and testing the project needs on a
# machine that lacks them (the lent GPU machine has no network). Run here, as root, with network:
# tests/gpu/bundle_deps.sh; then carry .devdeps and unpack it there with tests/gpu/unpack_deps.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=$ROOT/.devdeps
LIMIT_MIB=${GPT_DEVDEPS_LIMIT_MIB:-45}   # the whole working tree that travels must stay below 64 MiB

# What the project builds, links and runs its tests with (scripts/install_deps.sh less what the GPU
# image has: compilers, CMake, Python with numpy and h5py). dnnl-config.cmake requires OpenCL's
# headers and libOpenCL.so (Debian's oneDNN has the OpenCL GPU runtime), which libdnnl-dev only
# recommends.
WANTED=(libopenmpi-dev openmpi-bin openmpi-common libhdf5-openmpi-dev libboost-program-options-dev
        libdnnl-dev ocl-icd-opencl-dev libgtest-dev nlohmann-json3-dev libpcre2-dev)
# Taken as present there: Debian's required base (every Debian or Ubuntu image has its libraries,
# under the same sonames) and a C/C++ toolchain. Nothing else is assumed, not even apt's or Python's
# libraries: the image's Python may be a standalone build. unpack_deps.sh uses the system's copy of a
# bundled library wherever the image has one, so bundling more costs only size.
BASE=(gcc-12 g++-12 make)
# Declared dependencies that are present under other names (the image's own compilers bring their
# C and C++ development files) or that nothing here uses: the Fortran compiler (mpifort), ssh
# (mpiexec launches on one node only), jQuery (HTML docs), libltdl-dev (pulls autotools) and hwloc's
# plugins (they pull X11, libxml2 and 9 MiB of ICU; hwloc discovers the machine without them).
PLACEHOLDERS=(libc6-dev libstdc++-12-dev gfortran-12 openssh-client libjs-jquery libjs-jquery-ui
              libltdl-dev libhwloc-plugins)
# Base libraries that bundled ones link but an Ubuntu 24.04 image may lack: libunistring.so.2 (Ubuntu
# has .so.5; libpsl links it), libcom_err (e2fsprogs', which slim images drop; krb5 links it) and
# PCRE2's 8-bit library (base in Debian, so libpcre2-dev's libpcre2-8.so would point at nothing).
ALWAYS=(libunistring2 libcom-err2 libpcre2-8-0)

[[ $(dpkg --print-architecture) == amd64 ]] || { echo "bundle_deps.sh: needs an amd64 Debian 12 host" >&2; exit 2; }
grep -q '^VERSION_CODENAME=bookworm' /etc/os-release ||
  echo "bundle_deps.sh: warning: this is not Debian 12 (bookworm), which the bundle was checked with" >&2
[[ $(id -u) -eq 0 ]] || { echo "bundle_deps.sh: run as root (apt-get update and download)" >&2; exit 2; }

# Stale package lists name versions the mirror no longer has.
apt-get -q update >/dev/null
# The private status files below must not take (or wait for) the system's dpkg lock.
APT_OPTS=(-q -o APT::Sandbox::User=root -o Debug::NoLocking=1)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# dpkg status records saying that packages are installed. apt tells versions apart by their fields
# too, so the base gets its archive records whole (else apt "reinstalls" them); placeholders lose
# their dependencies and are held, which keeps apt from replacing them with the archive's version.
installed_records() {  # PACKAGE...
  apt-cache show --no-all-versions "$@" |
    awk '/^Package:/ { print; print "Status: install ok installed"; next } { print }'
}
placeholder_records() {  # PACKAGE...
  apt-cache show --no-all-versions "$@" | awk '
    /^Package:/ { print; print "Status: hold ok installed"; next }
    /^(Version|Architecture|Multi-Arch|Provides):/ || /^$/ { print }'
}
resolve() {  # STATUS PACKAGE...: the packages apt would install on top of STATUS
  local status=$1
  shift
  apt-get "${APT_OPTS[@]}" -s -o Dir::State::status="$status" install --no-install-recommends "$@" |
    awk '/^Inst / { sub(/:amd64$/, "", $2); print $2 }'
}

# 1. The base: the required packages and BASE, resolved on an empty system.
placeholder_records "${PLACEHOLDERS[@]}" >"$WORK/placeholders"
mapfile -t required < <(apt-cache dumpavail | awk '/^Package:/ { p = $2 } /^Priority: required/ { print p }' | sort -u)
mapfile -t base < <(resolve "$WORK/placeholders" "${required[@]}" "${BASE[@]}")
((${#base[@]} > 50)) || { echo "bundle_deps.sh: could not resolve the base system" >&2; exit 1; }
{
  installed_records "${base[@]}"
  cat "$WORK/placeholders"
} >"$WORK/status"

# 2. What WANTED needs on top of the base, downloaded by apt (it resolves alternatives and virtuals).
rm -rf "$DEST"
mkdir -p "$DEST/partial"
mapfile -t needed < <(resolve "$WORK/status" "${WANTED[@]}")
((${#needed[@]} > 0)) || { echo "bundle_deps.sh: apt resolved nothing for ${WANTED[*]}" >&2; exit 1; }
(cd "$DEST" && apt-get "${APT_OPTS[@]}" download "${needed[@]}" "${ALWAYS[@]}" >"$WORK/apt.log" 2>&1) ||
  { cat "$WORK/apt.log" >&2; exit 1; }
rm -rf "$DEST/partial"

count=$(find "$DEST" -name '*.deb' | wc -l)
(cd "$DEST" && find . -name '*.deb' -printf '%f\n' | sort) >"$DEST/PACKAGES.txt"
kib=$(du -sk "$DEST" | cut -f1)
echo "bundle_deps.sh: $count packages in $DEST: $((kib / 1024)) MiB ($kib KiB); the largest:"
(cd "$DEST" && find . -name '*.deb' -printf '%s %f\n' | sort -rn | head -5 |
  awk '{ printf "  %5.1f MiB  %s\n", $1 / 1048576, $2 }')
exclude=$(git -C "$ROOT" rev-parse --git-path info/exclude 2>/dev/null || echo "$ROOT/.git/info/exclude")
[[ $exclude == /* ]] || exclude=$ROOT/$exclude
grep -qx '/.devdeps/' "$exclude" 2>/dev/null || echo '/.devdeps/' >>"$exclude"
if ((kib > LIMIT_MIB * 1024)); then
  echo "bundle_deps.sh: over the ${LIMIT_MIB} MiB budget: the working tree might not travel" >&2
  exit 1
fi
echo "On the GPU machine: carry .devdeps; tests/gpu/run_gpu_suite.sh unpacks it by itself."
