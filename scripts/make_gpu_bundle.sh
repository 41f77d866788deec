#!/usr/bin/env bash
# Turns a cuda build into a self-contained folder that runs on a GPU machine without network:
# the binaries, the experiments, and every shared library they load except the C library family and
# the NVIDIA driver (the target's libstdc++/HDF5/benchmark may differ or be missing; see notes).
#   scripts/make_gpu_bundle.sh [BUILD_DIR=build/cuda] [BUNDLE_DIR=bundle]
# On the GPU machine:  BUNDLE_DIR/run_tests.sh   and   BUNDLE_DIR/kstudy run quick --out quick.h5
# KSTUDY_BUNDLE_EXES="kstudy" makes a study-only bundle (no benchmark, no tests: smaller, and a study can start
# before the test binary is built).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$repo/build/cuda}
bundle=${2:-$repo/bundle}
read -r -a exes <<< "${KSTUDY_BUNDLE_EXES:-kstudy kstudy_bench kstudy_tests}"
declare -A where=([kstudy]=src/app/kstudy [kstudy_bench]=src/app/kstudy_bench [kstudy_tests]=tests/kstudy_tests)
for exe in "${exes[@]}"; do
  [[ -n ${where[$exe]:-} ]] || { echo "make_gpu_bundle: unknown executable '$exe'" >&2; exit 2; }
  [[ -x $build/${where[$exe]} ]] || { echo "make_gpu_bundle: $build/${where[$exe]} missing: build the cuda preset first" >&2; exit 1; }
done
rm -rf "$bundle"; mkdir -p "$bundle/lib"
for exe in "${exes[@]}"; do cp "$build/${where[$exe]}" "$bundle/"; done
if [[ -x $bundle/kstudy_tests ]]; then
  # The tests' stand-in NVML (tests/fake_nvml), which kstudy_tests looks for in lib/, and the process
  # tests' helper program, which they look for beside kstudy_tests.
  cp "$build/tests/libkstudy_fake_nvidia_ml.so" "$bundle/lib/"
  cp "$build/tests/kstudy_process_helper" "$bundle/"
fi
cp -r "$repo/experiments" "$bundle/experiments"
# What the tests read from the source tree, in its layout beside kstudy_tests (tests/source_files.hpp looks
# there first), so the bundle passes its suite from any folder on any machine.
mkdir -p "$bundle/tests"
cp -r "$repo/tests/fixtures" "$repo/tests/malformed_experiments" "$bundle/tests/"
# `kstudy report` / `kstudy compare` look for scripts/ beside the binary (Python; on the target they need
# Debian's python3-h5py, python3-pandas, python3-matplotlib, python3-scipy).
mkdir -p "$bundle/scripts"
cp "$repo/scripts/kstudy_report.py" "$repo/scripts/device_rung_ncu.py" "$bundle/scripts/"
cp -r "$repo/scripts/kstudy_py" "$bundle/scripts/kstudy_py"
find "$bundle/scripts/kstudy_py" -name __pycache__ -prune -exec rm -rf {} +  # report/ has subpackages
# The Python rungs (kstudy/runner/python_rungs.hpp), found beside the binary as variants/<operation>/python_*.py.
(cd "$repo" && find variants -name 'python_*.py' -exec cp --parents {} "$bundle/" \;)
cat > "$bundle/rung_python" <<'PY'
#!/bin/sh
# The machine's python3 (KSTUDY_BUNDLE_PYTHON names another) with the library path the machine had before env.sh.
if [ -n "${KSTUDY_MACHINE_LD_LIBRARY_PATH:-}" ]; then
  LD_LIBRARY_PATH=$KSTUDY_MACHINE_LD_LIBRARY_PATH
  export LD_LIBRARY_PATH
else
  unset LD_LIBRARY_PATH
fi
exec "${KSTUDY_BUNDLE_PYTHON:-python3}" "$@"
PY
chmod +x "$bundle/rung_python"
# Left to the target: the C library family, the driver, and the CUDA toolkit's own libraries (cuBLAS,
# NVRTC, the runtime), which a GPU machine with the same CUDA major version provides.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libcuda\.so|libnvidia|libcu|libnvrtc|libnvJitLink)'
for exe in "${exes[@]}"; do
  ldd "$bundle/$exe" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    cp -Ln "$path" "$bundle/lib/$name" 2>/dev/null || true
  done
done
for exe in "${exes[@]}"; do
  # The binaries look in lib/ first ($ORIGIN/lib); patch it in where the build did not.
  if command -v patchelf >/dev/null; then patchelf --set-rpath '$ORIGIN/lib' "$bundle/$exe"; fi
done
cat > "$bundle/env.sh" <<'ENV'
# Source me: the bundle's libraries first, then the machine's CUDA toolkit.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The Python rungs' workers run the machine's python3 with the machine's own library path (rung_python): the
# bundle's lib/ (the build machine's libstdc++ and HDF5) must not shadow what PyTorch, CuPy or JAX load.
export KSTUDY_MACHINE_LD_LIBRARY_PATH=${KSTUDY_MACHINE_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}
export KSTUDY_RUNG_PYTHON=${KSTUDY_RUNG_PYTHON:-$here/rung_python}
cuda_lib=${CUDA_HOME:-/usr/local/cuda}/lib64
export LD_LIBRARY_PATH="$here/lib:$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
export KSTUDY_EXPERIMENTS_DIR="$here/experiments"
ENV
cat > "$bundle/run_tests.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the whole test suite of this cuda build on this machine's GPU.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
exec "$here/kstudy_tests" "$@"
RUN
chmod +x "$bundle/run_tests.sh"
du -sh "$bundle"
echo "bundle: $bundle"
