#!/usr/bin/env bash
# Make sure chapter 12's listings can be compiled and run here: a CPU OpenCL driver (Debian's PoCL, found by the
# ICD loader through /etc/OpenCL/vendors/pocl.icd), the ICD loader itself, and gcc with -fopenacc. On
# Debian/Ubuntu as root it installs what is missing with apt-get (pocl-opencl-icd ocl-icd-libopencl1 gcc);
# otherwise it says what to install. Where NVIDIA's OpenCL library is present but no ICD file names it (the lent
# GPU machines), it writes /etc/OpenCL/vendors/nvidia.icd so that OpenCL sees the GPU too. Idempotent.
set -euo pipefail
VENDORS=/etc/OpenCL/vendors
missing=()
[ -e "$VENDORS/pocl.icd" ] || missing+=(pocl-opencl-icd)
# (the ICD loader, ocl-icd-libopencl1, is installed alongside; pyopencl's wheel also bundles one)
gcc_ok() {
  command -v gcc >/dev/null 2>&1 || return 1
  echo 'int main(void){int s=0;
#pragma acc parallel loop reduction(+:s)
for(int i=0;i<4;++i) s+=i; return s!=6;}' > /tmp/ensure_openacc_$$.c
  gcc -fopenacc /tmp/ensure_openacc_$$.c -o /tmp/ensure_openacc_$$ >/dev/null 2>&1 && /tmp/ensure_openacc_$$
  local rc=$?
  rm -f /tmp/ensure_openacc_$$ /tmp/ensure_openacc_$$.c
  return $rc
}
gcc_ok || missing+=(gcc)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing ${missing[*]} for chapter 12 (OpenCL on the CPU, OpenACC with gcc) (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pocl-opencl-icd ocl-icd-libopencl1 gcc >/dev/null
  else
    echo "error: chapter 12 compiles and runs OpenCL and OpenACC code and needs: ${missing[*]}." >&2
    echo "       Debian/Ubuntu: sudo apt-get install pocl-opencl-icd ocl-icd-libopencl1 gcc (then run again)" >&2
    exit 1
  fi
  [ -e "$VENDORS/pocl.icd" ] && gcc_ok || { echo "error: installing ${missing[*]} did not help" >&2; exit 1; }
fi
# NVIDIA's OpenCL: the driver ships libnvidia-opencl.so.1; the ICD loader finds it only through an .icd file.
nvidia_opencl() {   # the library's path, or its name when only the linker's cache knows it
  local f
  for f in /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 /usr/lib64/libnvidia-opencl.so.1 \
           /usr/lib/libnvidia-opencl.so.1 /usr/local/nvidia/lib64/libnvidia-opencl.so.1; do
    [ -e "$f" ] && { echo "$f"; return 0; }
  done
  ldconfig -p 2>/dev/null | grep -q 'libnvidia-opencl\.so\.1' && { echo libnvidia-opencl.so.1; return 0; }
  return 1
}
if ! grep -qs libnvidia-opencl "$VENDORS"/*.icd && lib=$(nvidia_opencl); then
  if [ -w "$VENDORS" ] || { [ "$(id -u)" = 0 ] && mkdir -p "$VENDORS"; }; then
    echo "$lib" > "$VENDORS/nvidia.icd"
    echo "==> OpenCL: wrote $VENDORS/nvidia.icd ($lib: NVIDIA's OpenCL library was there, unnamed)"
  else
    echo "note: NVIDIA's OpenCL library is installed but no ICD file names it; as root:" \
         "echo $lib > $VENDORS/nvidia.icd" >&2
  fi
fi
echo "==> OpenCL drivers: $(cd "$VENDORS" && ls ./*.icd | tr '\n' ' ')| $(gcc --version | head -1) with -fopenacc"
