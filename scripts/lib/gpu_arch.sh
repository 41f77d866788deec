# shellcheck shell=bash
# The compute capability of the GPU present, read from nvidia-smi, so that the cuda flavour is built for the GPU
# that is here. Sourced by scripts/bootstrap.sh and scripts/quickstart.sh; run, it prints GPU 0's arch:
#   scripts/lib/gpu_arch.sh          75 on a Tesla T4 (7.5), 120 on an RTX 5090 (12.0); exit 1 and why, no GPU
#
#   kstudy_gpu_detect   sets kstudy_gpu_arch (GPU 0's compute capability without the dot: 7.5 -> 75,
#                       12.0 -> 120) and kstudy_gpu_cc (as nvidia-smi prints it: 7.5) and returns 0; with no GPU
#                       to read, sets kstudy_gpu_error (why, one phrase) and returns 1. Where the GPUs differ, it
#                       takes GPU 0 (nvidia-smi's order) and says so on stderr.
#   kstudy_gpu_name     prints GPU 0's name (Tesla T4), or nothing.
#   kstudy_gpu_present  whether nvidia-smi lists a GPU (nvidia-smi -L).
#
# Environment: KSTUDY_NVIDIA_SMI, the nvidia-smi to call (default: the one on PATH); the tests name a fake.

kstudy_gpu_detect() {
  kstudy_gpu_arch='' kstudy_gpu_cc='' kstudy_gpu_error=''
  local smi=${KSTUDY_NVIDIA_SMI:-nvidia-smi} out c line
  local caps=()
  if ! command -v "$smi" >/dev/null 2>&1; then
    if [[ -n ${KSTUDY_NVIDIA_SMI:-} ]]; then
      kstudy_gpu_error="KSTUDY_NVIDIA_SMI=$smi is not a program"
    else
      kstudy_gpu_error="no nvidia-smi on PATH"
    fi
    return 1
  fi
  if ! out=$("$smi" --query-gpu=compute_cap --format=csv,noheader 2>&1); then
    while IFS= read -r line; do [[ -z ${line//[[:space:]]/} ]] || break; done <<< "$out"  # its first words
    kstudy_gpu_error="$smi --query-gpu=compute_cap failed${line:+ ($line)}"
    return 1
  fi
  while IFS= read -r line; do
    line=${line//[[:space:]]/}
    [[ -z $line ]] || caps+=("$line")
  done <<< "$out"
  if [[ ${#caps[@]} -eq 0 ]]; then
    kstudy_gpu_error="$smi lists no GPU"
    return 1
  fi
  if [[ ! ${caps[0]} =~ ^([0-9]+)\.([0-9])$ ]]; then
    kstudy_gpu_error="$smi gave '${caps[0]}' for GPU 0's compute capability, not a number such as 7.5"
    return 1
  fi
  kstudy_gpu_cc=${caps[0]}
  kstudy_gpu_arch=${BASH_REMATCH[1]}${BASH_REMATCH[2]}
  for c in "${caps[@]:1}"; do
    if [[ $c != "$kstudy_gpu_cc" ]]; then
      c=$(printf '%s, ' "${caps[@]}")
      echo "kstudy: note: the GPUs here differ in compute capability (${c%, } in nvidia-smi's order):" \
        "building for GPU 0's, sm_$kstudy_gpu_arch (--arch or KSTUDY_CUDA_ARCH for another)" >&2
      break
    fi
  done
  return 0
}

kstudy_gpu_name() {
  local out
  out=$("${KSTUDY_NVIDIA_SMI:-nvidia-smi}" --query-gpu=name --format=csv,noheader 2>/dev/null) || return 0
  out=${out%%$'\n'*}
  printf '%s\n' "${out%$'\r'}"
}

kstudy_gpu_present() {
  local out
  out=$("${KSTUDY_NVIDIA_SMI:-nvidia-smi}" -L 2>/dev/null) || return 1
  [[ $out == *GPU* ]]
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  kstudy_gpu_detect || { echo "gpu_arch: error: $kstudy_gpu_error" >&2; exit 1; }
  echo "$kstudy_gpu_arch"
fi
