#!/usr/bin/env bash
# On the GPU machine: unpacks .devdeps/*.deb (tests/gpu/bundle_deps.sh) into a prefix and writes
# PREFIX/env.sh, which puts Open MPI, parallel HDF5, Boost, oneDNN, GTest, nlohmann-json and PCRE2 on
# the paths. Source it (PREFIX from $GPT_DEPS_PREFIX, default /opt/gptdeps; run_gpu_suite.sh does)
# or run it with [PREFIX].

if [[ ${BASH_SOURCE[0]} != "$0" ]]; then
  # Sourced: the work runs in a child shell, so that its options and variables stay out of the caller.
  GPT_DEPS_PREFIX=${GPT_DEPS_PREFIX:-/opt/gptdeps}
  if bash "${BASH_SOURCE[0]}" "$GPT_DEPS_PREFIX"; then
    # shellcheck source=/dev/null
    source "$GPT_DEPS_PREFIX/env.sh"
  else
    echo "unpack_deps.sh: failed; the carried dependencies are not on the paths" >&2
    return 1
  fi
  return 0
fi

set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEBS=${GPT_DEVDEPS_DIR:-$ROOT/.devdeps}
PREFIX=${1:-${GPT_DEPS_PREFIX:-/opt/gptdeps}}
mkdir -p "$PREFIX"
PREFIX=$(cd "$PREFIX" && pwd)
ARCH=x86_64-linux-gnu
LIB=$PREFIX/usr/lib/$ARCH
STAMP=$PREFIX/.gptdeps-stamp

shopt -s nullglob
debs=("$DEBS"/*.deb)
((${#debs[@]} > 0)) || { echo "unpack_deps.sh: no .deb files in $DEBS (run tests/gpu/bundle_deps.sh)" >&2; exit 1; }
USE_SYSTEM_LIBS=${GPT_DEPS_USE_SYSTEM_LIBS:-1}   # 0: the bundled copy of every library
# What was unpacked, and how: a changed bundle or script unpacks afresh.
stamp="$(cd "$DEBS" && stat -c '%s %n' ./*.deb | cksum) $(cksum <"${BASH_SOURCE[0]}") $USE_SYSTEM_LIBS"

extract() {  # DEB DIR: dpkg-deb where there is one, else ar and tar
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$1" "$2"
    return
  fi
  local member
  member=$(ar t "$1" | grep -m1 '^data\.tar')
  case $member in
    *.xz) if command -v xz >/dev/null; then ar p "$1" "$member" | xz -dc | tar -x -C "$2"
          else ar p "$1" "$member" | python3 -c 'import sys, tarfile
tarfile.open(fileobj=sys.stdin.buffer, mode="r|xz").extractall(sys.argv[1])' "$2"; fi ;;
    *.zst) ar p "$1" "$member" | zstd -dc | tar -x -C "$2" ;;
    *.gz) ar p "$1" "$member" | gzip -dc | tar -x -C "$2" ;;
    *) ar p "$1" "$member" | tar -x -C "$2" ;;
  esac
}

# Libraries whose headers the project compiles against, or that load their own plugins from the
# prefix: always the bundled copy. Any other bundled library that the system has under the same
# soname resolves to the system's copy instead, so that the image's own programs (cmake, python,
# nvcc) never load an older Debian library through LD_LIBRARY_PATH.
OWN='^lib(mpi|mpi_.*|open-(pal|rte)|ompitrace|oshmem|mca_common_.*|pmix|hdf5.*|dnnl|boost_.*|gtest.*|gmock.*)\.so'

# The system's shared libraries by soname.
declare -A SYSTEM=()
if command -v ldconfig >/dev/null; then
  while read -r name path; do
    if [[ $path != "$PREFIX"/* ]]; then SYSTEM[$name]=$path; fi
  done < <(ldconfig -p | awk '/x86-64/ && / => / { print $1, $NF }')
fi

install_prefix() {  # USE_SYSTEM_LIBS (1 or 0)
  # Never delete a folder this script did not make.
  if [[ -n $(ls -A "$PREFIX") && ! -f $STAMP ]]; then
    echo "unpack_deps.sh: $PREFIX is not empty and was not made here; choose another prefix" >&2
    exit 1
  fi
  find "$PREFIX" -mindepth 1 -delete
  for deb in "${debs[@]}"; do extract "$deb" "$PREFIX"; done

  # Absolute links point into the system's /usr: into the prefix instead where the target is there,
  # else to the system's library of that soname (zlib1g-dev's libz.so names Debian's exact zlib).
  local link target name
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    if [[ -e $PREFIX$target ]]; then
      ln -sfn "$PREFIX$target" "$link"
    elif [[ ! -e $target ]]; then
      name=${target##*/}
      while [[ $name == *.so.* && -z ${SYSTEM[$name]:-} ]]; do name=${name%.*}; done
      if [[ -n ${SYSTEM[$name]:-} ]]; then ln -sfn "${SYSTEM[$name]}" "$link"; fi
    fi
  done < <(find "$PREFIX" -type l -lname '/*' -print0)

  # What the packages' postinst scripts make through update-alternatives (dpkg -x runs none).
  local pair
  for pair in mpicc:mpicc.openmpi mpicxx:mpic++.openmpi mpic++:mpic++.openmpi mpiCC:mpic++.openmpi \
      mpirun:mpirun.openmpi mpiexec:mpiexec.openmpi h5pcc:h5pcc.openmpi; do
    if [[ -e $PREFIX/usr/bin/${pair#*:} ]]; then ln -sfn "${pair#*:}" "$PREFIX/usr/bin/${pair%%:*}"; fi
  done
  if [[ -e $PREFIX/usr/lib/libpsm1/libpsm_infinipath.so.1.16 ]]; then  # libfabric links it
    ln -sfn ../libpsm1/libpsm_infinipath.so.1.16 "$LIB/libpsm_infinipath.so.1"
  fi

  # The HDF5 compiler wrappers (FindHDF5 runs h5pcc -show) hold their prefix in one line, and link
  # -lcrypto -lcurl -lsz -lz, whose .so links are in the prefix, not in the linker's own path.
  local wrapper
  for wrapper in "$PREFIX"/usr/bin/h5*.openmpi; do
    sed -i -e "s|^prefix=\"/usr\"\$|prefix=\"$PREFIX/usr\"|" \
      -e "s|^H5BLD_LDFLAGS=\"|H5BLD_LDFLAGS=\"-L$LIB |" "$wrapper"
  done

  # pkg-config files (PCRE2's) name /usr as their prefix, like the wrappers.
  sed -i -E "s@^(prefix|exec_prefix|libdir|includedir)=/usr(/|\$)@\\1=$PREFIX/usr\\2@" \
    "$LIB"/pkgconfig/*.pc "$PREFIX"/usr/share/pkgconfig/*.pc 2>/dev/null || true

  if (($1)); then
    local dir entry
    for dir in "$LIB" "$PREFIX/lib/$ARCH"; do
      [[ -d $dir ]] || continue
      for entry in "$dir"/lib*.so.*; do
        name=${entry##*/}
        if [[ -n ${SYSTEM[$name]:-} && ! $name =~ $OWN ]]; then ln -sfn "${SYSTEM[$name]}" "$entry"; fi
      done
    done
  fi
  echo "$stamp" >"$STAMP"
}

write_env() {
  local q
  q=$(printf %q "$PREFIX")
  {
    echo "# Written by tests/gpu/unpack_deps.sh: the dependencies unpacked in $PREFIX, on the paths."
    echo "export GPT_DEPS_PREFIX=$q"
    echo "export PATH=$q/usr/bin\${PATH:+:\$PATH}"
    local libs="$q/usr/lib/$ARCH/openmpi/lib:$q/usr/lib/$ARCH/pmix2/lib:$q/usr/lib/$ARCH:$q/lib/$ARCH"
    echo "export LD_LIBRARY_PATH=$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    # find_package's config files (Boost, dnnl, GTest) and find_library for HDF5's link line.
    echo "export CMAKE_PREFIX_PATH=$q/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
    echo "export PKG_CONFIG_PATH=$q/usr/lib/$ARCH/pkgconfig:$q/usr/share/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
    # FindMPI and FindHDF5 look for mpicxx and h5pcc there first (HDF5_ROOT: there only).
    echo "export MPI_HOME=$q/usr HDF5_ROOT=$q/usr"
    # Open MPI and PMIx find their plugins, help texts and wrapper data through these when moved;
    # Debian's sysconfdir holds the MCA defaults (no UCX, OFI or openib) outside the prefix.
    echo "export OPAL_PREFIX=$q/usr OPAL_SYSCONFDIR=$q/etc/openmpi"
    echo "export PMIX_PREFIX=$q/usr/lib/$ARCH/pmix2 PMIX_MCA_mca_base_component_path=$q/usr/lib/$ARCH/pmix2/lib/pmix"
    echo "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
    # Without ssh or rsh, mpiexec refuses to start even on one node; the agent is never run there.
    echo "command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=false"
  } >"$PREFIX/env.sh"
}

# Unresolved libraries of the programs and libraries the build and the tests use, with env.sh loaded.
check() {
  (
    # shellcheck source=/dev/null
    source "$PREFIX/env.sh"
    local f
    for f in "$PREFIX/usr/bin/orterun" "$PREFIX/usr/bin/opal_wrapper" "$LIB"/openmpi/lib/lib*.so.*[0-9] \
        "$LIB"/libhdf5_openmpi.so.* "$LIB"/libdnnl.so.* "$LIB"/libboost_program_options.so.*; do
      [[ -f $f && ! -L $f ]] || continue
      ldd "$f" 2>&1 | grep -E 'not found' | sed "s|^|${f#"$PREFIX"/}: |" || true
    done
  )
}

if [[ $(cat "$STAMP" 2>/dev/null) != "$stamp" ]]; then
  start=$SECONDS
  install_prefix "$USE_SYSTEM_LIBS"
  write_env
  problems=$(check)
  if [[ -n $problems && $USE_SYSTEM_LIBS == 1 ]]; then
    echo "unpack_deps.sh: with the system's copies of some libraries:" >&2
    echo "$problems" >&2
    echo "unpack_deps.sh: unpacking again with the bundled copies only" >&2
    install_prefix 0
    problems=$(check)
  fi
  [[ -z $problems ]] || { echo "unpack_deps.sh: unresolved libraries:" >&2; echo "$problems" >&2; }
  echo "unpack_deps.sh: ${#debs[@]} packages unpacked into $PREFIX in $((SECONDS - start)) s"
fi
write_env
echo "unpack_deps.sh: environment in $PREFIX/env.sh"
